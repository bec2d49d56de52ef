//! What the benchmark programs share: how they pick orders and how they describe the
//! machine they ran on. Included with `#[path = "support/mod.rs"] mod support;`.

#![allow(dead_code)]

/// A small per-thread generator for picking orders (xorshift64*): cheap enough not to
/// show in what is measured, and seeded so runs pick the same orders.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The CPU's model name from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// A sandbox service in `dir` with one merchant's key, set up for measuring the engine's
/// own work: rate limiting off, synchronous=NORMAL.
pub struct Shop {
    /// The service, on `dir/shop.db`.
    pub service: coinorder::Service,
    /// The merchant behind `key`.
    pub merchant: coinorder::Merchant,
    /// The merchant's plain API key, for `x-api-key`.
    pub key: String,
    /// A typical order: a mug with a title, a description and a callback URL.
    pub order: coinorder::CreateOrder,
}

impl Shop {
    /// Opens the service (without background checkpoints) and issues the key.
    pub fn open(dir: &std::path::Path) -> Result<Shop, Box<dyn std::error::Error>> {
        use coinorder::{Config, CreateOrder, Environment, NewApiKey, RateLimit, Service};
        let mut config = Config::new(Environment::Sandbox);
        config.rate_limit = RateLimit::OFF;
        config.sqlite.synchronous_full = false;
        // No thread of the service's own: callgrind counts every thread's instructions,
        // and a checkpoint now and then would make the counts depend on timing.
        config.sqlite.background_checkpoints = false;
        let service = Service::open(dir.join("shop.db"), config)?;
        let created =
            service.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
        let key = created.plain_key.expose().to_string();
        let merchant = service.authenticate(Some(&key))?;
        let order = CreateOrder {
            currency: "USD".into(),
            amount: "19.99".parse()?,
            title: Some("Mug".into()),
            description: Some("A mug with the shop's logo, 350 ml".into()),
            callback_url: Some("https://shop.example/orders/7".into()),
            ..Default::default()
        };
        Ok(Shop { service, merchant, key, order })
    }
}
