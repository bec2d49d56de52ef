//! Clients of the chains `serve` watches for live payments: an Esplora-compatible HTTP
//! API for Bitcoin ([`esplora`]) and an Ethereum JSON-RPC node ([`ethereum`]).
//!
//! They only fetch and parse what a chain says; deciding what a sighting means for an
//! order (record, confirm, reject) is the service's chain watcher
//! (`Service::watch_chain_due`).
//!
//! Both take their endpoint as one URL through the crate-private `Endpoint`, which keeps
//! the rules for an API key in that URL in one place: where it is sent and what of it may
//! be shown.

pub mod esplora;
pub mod ethereum;

use base64::Engine;
use percent_encoding::percent_decode_str;

/// Parts of an endpoint URL shorter than this are blanked out of messages only when they
/// are a whole component (the password, the whole path, query or fragment): blanking
/// every `api` or `v1` a server says would mangle messages while protecting nothing.
const MIN_SECRET_PART: usize = 4;

/// What stands in a message where a part of the endpoint URL was.
const REDACTED: &str = "***";

/// What messages and `Debug` show of an endpoint URL: its scheme, host and port only.
/// Hosted Esplora and Ethereum RPC URLs carry API keys in their path, query or user
/// info, and a key must never reach a log.
///
/// The port is shown only when the URL spells it out (the clients' own messages name the
/// default port too); a URL that does not parse shows as `(unparsable URL)`.
pub fn endpoint_for_display(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(url) => origin(&url, url.port()),
        Err(_) => "(unparsable URL)".to_string(),
    }
}

/// `scheme://host[:port]` of `url`: the only part of an endpoint URL that may be shown.
fn origin(url: &url::Url, port: Option<u16>) -> String {
    let host = url.host_str().filter(|host| !host.is_empty()).unwrap_or("(no host)");
    match port {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// A chain endpoint's base URL, split into what a request needs and what a message may
/// show.
///
/// ureq 3 sends no credentials from a URL's userinfo, so they travel as an HTTP Basic
/// `Authorization` header (as curl would send them); every part of the URL that may hold
/// an API key is remembered so that [`Endpoint::scrub`] can blank it out of text a server
/// sent back (a gateway's error page may echo the request).
pub(crate) struct Endpoint {
    /// `scheme://host:port`, the port spelled out even when it is the scheme's default.
    origin: String,
    /// The URL without userinfo or fragment: what requests go to.
    url: url::Url,
    /// `Basic ...` from the URL's userinfo, if it has any.
    authorization: Option<String>,
    /// The parts of the URL that may be secrets, longest first so that a secret which
    /// contains another is blanked whole.
    secrets: Vec<String>,
}

/// Why a text is not an endpoint URL. It never quotes the text; the client whose URL it
/// is words the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EndpointError {
    /// Not a URL at all; url's parse errors describe the problem without quoting the input.
    Invalid(url::ParseError),
    /// A scheme other than `http` or `https`.
    Scheme {
        /// The scheme the URL has.
        scheme: String,
        /// The URL's `scheme://host:port`, to name it by.
        origin: String,
    },
    /// No host to connect to.
    NoHost {
        /// The URL's `scheme://host:port`, to name it by.
        origin: String,
    },
}

impl Endpoint {
    /// The endpoint at `text`, an `http://` or `https://` URL that may carry an API key in
    /// its path, query or userinfo (surrounding whitespace is ignored).
    pub(crate) fn parse(text: &str) -> Result<Endpoint, EndpointError> {
        let mut url = url::Url::parse(text.trim()).map_err(EndpointError::Invalid)?;
        let origin = origin(&url, url.port_or_known_default());
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(EndpointError::Scheme { scheme: url.scheme().to_string(), origin });
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(EndpointError::NoHost { origin });
        }
        let secrets = secrets_of(&url);
        let authorization = if url.username().is_empty() && url.password().is_none() {
            None
        } else {
            // A `Url` keeps userinfo percent-encoded; the server wants it decoded once.
            let credentials = format!("{}:{}", decoded(url.username()), decoded(url.password().unwrap_or("")));
            Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials)))
        };
        // The userinfo travels as the header instead; setting it only fails for a URL
        // without a host, refused above.
        url.set_username("")
            .and_then(|()| url.set_password(None))
            .map_err(|()| EndpointError::NoHost { origin: origin.clone() })?;
        // A fragment is never part of a request.
        url.set_fragment(None);
        Ok(Endpoint { origin, url, authorization, secrets })
    }

    /// `scheme://host:port` (the port always spelled out): all of the URL that errors and
    /// `Debug` may show.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// The URL requests go to: the one given without its userinfo and fragment, so its
    /// path and query (where an API key may be) are kept.
    pub(crate) fn url(&self) -> &url::Url {
        &self.url
    }

    /// The `Authorization` header value (`Basic ...`) from the URL's userinfo, if any.
    pub(crate) fn authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }

    /// `text` with every part of the URL that may be a secret replaced by `***`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), REDACTED);
        }
        text
    }
}

/// The parts of `url` that may be or contain an API key, as written and percent-decoded,
/// longest first. The password and the whole path, query and fragment count at any
/// length; the user name, a path segment or a query value from [`MIN_SECRET_PART`] bytes.
fn secrets_of(url: &url::Url) -> Vec<String> {
    let mut secrets = Vec::new();
    let mut add = |part: &str, whole: bool| {
        if !part.is_empty() && (whole || part.len() >= MIN_SECRET_PART) {
            secrets.push(part.to_string());
            secrets.push(decoded(part));
        }
    };
    add(url.password().unwrap_or(""), true);
    add(url.username(), false);
    if url.path() != "/" {
        add(url.path(), true);
    }
    for segment in url.path_segments().into_iter().flatten() {
        add(segment, false);
    }
    let query = url.query().unwrap_or("");
    add(query, true);
    for (_, value) in query.split('&').filter_map(|pair| pair.split_once('=')) {
        add(value, false);
    }
    // Form decoding also reads `+` as a space, as a server quoting the value would.
    for (_, value) in url.query_pairs() {
        add(&value, false);
    }
    add(url.fragment().unwrap_or(""), true);
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    secrets
}

/// `%XX` escapes decoded, as UTF-8 (lossily); a `%` not followed by two hex digits stays.
fn decoded(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::{decoded, endpoint_for_display, Endpoint, EndpointError};

    #[test]
    fn an_endpoint_is_shown_without_its_credentials_path_or_query() {
        let shown = endpoint_for_display("https://user:secret@rpc.example:8545/v3/KEY123?apikey=Q");
        assert_eq!(shown, "https://rpc.example:8545");
        assert_eq!(endpoint_for_display("https://blockstream.info/api"), "https://blockstream.info");
        assert_eq!(endpoint_for_display("not a url secret"), "(unparsable URL)");
    }

    #[test]
    fn percent_escapes_decode() {
        assert_eq!(decoded("p%40ss%3Aword"), "p@ss:word");
        assert_eq!(decoded("a%40b%3Ac"), "a@b:c");
        assert_eq!(decoded("100%"), "100%");
        assert_eq!(decoded("%zz"), "%zz");
    }

    #[test]
    fn userinfo_becomes_basic_authentication_and_leaves_the_url() {
        let endpoint = Endpoint::parse(" https://bob:pa%24%24word@rpc.example/v3/KEY123?key=Q#frag ").expect("valid");
        assert_eq!(endpoint.origin(), "https://rpc.example:443");
        assert_eq!(endpoint.url().as_str(), "https://rpc.example/v3/KEY123?key=Q");
        // base64("bob:pa$$word")
        assert_eq!(endpoint.authorization(), Some("Basic Ym9iOnBhJCR3b3Jk"));
        assert_eq!(Endpoint::parse("http://127.0.0.1:3002").expect("valid").authorization(), None);
    }

    #[test]
    fn whole_components_are_blanked_at_any_length_and_parts_from_four_bytes() {
        let endpoint = Endpoint::parse("https://bob:pw@rpc.example/v3/KEY1?k=Q&token=a+b%2Bc#frag").expect("valid");
        let scrubbed = endpoint.scrub("pw bob /v3/KEY1 v3 KEY1 k=Q&token=a+b%2Bc Q a+b%2Bc a b+c");
        assert_eq!(scrubbed, "*** bob *** v3 *** *** Q *** ***");
        // The origin is never a secret.
        assert_eq!(endpoint.scrub("https://rpc.example:443"), "https://rpc.example:443");
    }

    #[test]
    fn urls_that_are_no_http_endpoints_are_refused_without_quoting_them() {
        assert!(matches!(Endpoint::parse("not a url KEY"), Err(EndpointError::Invalid(_))));
        assert!(matches!(Endpoint::parse("http://:8545/KEY"), Err(EndpointError::Invalid(_))));
        assert_eq!(
            Endpoint::parse("ftp://user:secret@files.example/KEY").err(),
            Some(EndpointError::Scheme { scheme: "ftp".into(), origin: "ftp://files.example:21".into() })
        );
        assert_eq!(
            Endpoint::parse("unix:/run/geth.ipc").err(),
            Some(EndpointError::Scheme { scheme: "unix".into(), origin: "unix://(no host)".into() })
        );
    }
}
