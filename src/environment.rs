//! The two environments, sandbox and live (spec §1): a domain type at the bottom of the
//! crate, used by every layer above it (keys, addresses, rates, storage, configuration).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The environment a service, key, order or event belongs to (spec §1).
///
/// Nothing of one environment is visible from the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Environment {
    /// Test environment: no real money, simulated payments, keys start with `test_`.
    Sandbox,
    /// Production: real money, keys start with `prod_`.
    Live,
}

impl Environment {
    /// The name used in storage, the CLI and JSON: `sandbox` or `live`.
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Sandbox => "sandbox",
            Environment::Live => "live",
        }
    }

    /// The prefix every API key of this environment starts with.
    pub fn key_prefix(self) -> &'static str {
        match self {
            Environment::Sandbox => "test_",
            Environment::Live => "prod_",
        }
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Environment {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sandbox" => Ok(Environment::Sandbox),
            "live" => Ok(Environment::Live),
            other => Err(Error::invalid("environment", format!("must be sandbox or live, got {other:?}"))),
        }
    }
}
