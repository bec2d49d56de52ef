//! The outgoing HTTP agents' name resolution: ureq's, except for how a lookup with a
//! deadline waits.
//!
//! ureq's default resolver waits for a lookup with a deadline on a channel, and waiting on
//! a std channel gives the waiting thread std's thread handle, which outlives the call. A C
//! or Python host's main thread never frees it, so a host that runs its program under
//! valgrind saw it as possibly lost at exit. This resolver waits on a condition variable,
//! which leaves the calling thread as it was.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex};

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// An agent with `config` that resolves names with [`DeadlineResolver`].
pub(crate) fn agent(config: ureq::config::Config) -> ureq::Agent {
    ureq::Agent::with_parts(config, DefaultConnector::default(), DeadlineResolver)
}

/// Resolves with the system's resolver, on a thread of its own when the request has a
/// deadline, as ureq's own resolver does (a lookup cannot be interrupted, so a late one is
/// left to finish on its thread).
#[derive(Debug, Default)]
pub(crate) struct DeadlineResolver;

/// How many addresses a [`ResolvedSocketAddrs`] holds (ureq keeps the first 16).
const MAX_ADDRESSES: usize = 16;

/// The answer of a lookup, once it has come.
type Lookup = Mutex<Option<std::io::Result<Vec<SocketAddr>>>>;

impl Resolver for DeadlineResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Err(ureq::Error::BadUri(format!("{}: no scheme or host", crate::redact_url(&uri.to_string()))));
        };
        let host_and_port = DefaultResolver::host_and_port(scheme, authority)
            .ok_or_else(|| ureq::Error::BadUri(format!("{}: no port", crate::redact_url(&uri.to_string()))))?;
        let addresses = if timeout.after.is_not_happening() {
            host_and_port.to_socket_addrs()?.collect()
        } else {
            let answer: Arc<(Lookup, Condvar)> = Arc::new((Mutex::new(None), Condvar::new()));
            let lookup = {
                let answer = Arc::clone(&answer);
                move || {
                    let found = host_and_port.to_socket_addrs().map(Iterator::collect);
                    *answer.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(found);
                    answer.1.notify_all();
                }
            };
            std::thread::Builder::new().name("coinorder-resolve".into()).spawn(lookup)?;
            let (slot, arrived) = &*answer;
            let slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            let (mut slot, _) = arrived
                .wait_timeout_while(slot, *timeout.after, |found| found.is_none())
                .unwrap_or_else(|p| p.into_inner());
            match slot.take() {
                Some(found) => found?,
                None => return Err(ureq::Error::Timeout(timeout.reason)),
            }
        };
        let mut resolved = self.empty();
        for address in config.ip_family().keep_wanted(addresses.into_iter()).take(MAX_ADDRESSES) {
            resolved.push(address);
        }
        if resolved.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_a_literal_address_with_and_without_a_deadline() {
        let agent_config = ureq::config::Config::default();
        let uri: ureq::http::Uri = "http://127.0.0.1:8080/x".parse().expect("uri");
        let expected: SocketAddr = "127.0.0.1:8080".parse().expect("address");
        let no_deadline = NextTimeout::default();
        let with_deadline = NextTimeout {
            after: std::time::Duration::from_secs(5).into(),
            reason: ureq::Timeout::Resolve,
            per_read: None,
            per_write: None,
        };
        for timeout in [no_deadline, with_deadline] {
            let found = DeadlineResolver.resolve(&uri, &agent_config, timeout).expect("resolved");
            assert_eq!(found.iter().copied().collect::<Vec<_>>(), [expected]);
        }
    }

    #[test]
    fn a_uri_without_a_host_is_refused() {
        let uri: ureq::http::Uri = "/only/a/path".parse().expect("uri");
        let refused = DeadlineResolver.resolve(&uri, &ureq::config::Config::default(), NextTimeout::default());
        assert!(refused.is_err());
    }
}
