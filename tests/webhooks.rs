//! Webhook acceptance tests (issue 4, DESIGN §7) against a real local HTTP receiver:
//! signatures (our verifier and the public `standardwebhooks` Python package), the exact
//! body bytes, target resolution, redelivery, per-order ordering, secret rotation, live
//! mode's refusal of private targets, leases across two services, and secrets kept out
//! of Debug output. Failures and the retry schedule are in `webhooks_retry.rs`.

mod smtp_support;
mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use coinorder::signature::VerifyError;
use coinorder::{DeliveryState, Environment, EventType, NewApiKey, Service, SimulateAction, SmtpConfig};
use serde_json::Value;
use support::*;

/// Runs `deliver_due` until every event of `order_ids` is delivered (bounded rounds).
fn deliver_all(env: &Env, order_ids: &[&str]) {
    for _ in 0..10 {
        env.deliver();
        let pending =
            order_ids.iter().flat_map(|id| env.deliveries(id)).filter(|d| d.state != DeliveryState::Delivered).count();
        if pending == 0 {
            return;
        }
    }
    let states: Vec<_> =
        order_ids.iter().flat_map(|id| env.deliveries(id)).map(|d| (d.event.event_id, d.state, d.last_error)).collect();
    panic!("not everything delivered after 10 rounds: {states:?}");
}

// ----- Signatures, headers, body -----

#[test]
fn every_request_verifies_with_ours_and_the_standardwebhooks_package_and_carries_the_stored_payload() {
    let rx = Receiver::start();
    let env = real(|_| {});
    let url = rx.url_with_path("/hooks/coinorder?shop=1");

    // order.pending then order.paid; order.paid at once; order.cancelled.
    let a = env.order(Some(&url));
    assert_eq!(env.pay(&a, "4").len(), 1);
    assert_eq!(env.pay(&a, "6").len(), 1);
    let (b, _) = env.paid_order(Some(&url));
    let c = env.order(Some(&url));
    env.svc.cancel_order(&env.merchant, &c).expect("cancel");
    let events: Vec<_> = [&a, &b, &c].iter().flat_map(|id| env.svc.order_events(id).expect("events")).collect();
    assert_eq!(events.len(), 4);

    deliver_all(&env, &[&a, &b, &c]);
    let requests = rx.wait_for(4, WAIT);
    assert_eq!(requests.len(), 4, "one request per event: {requests:?}");

    let secret = env.secret();
    assert!(secret.starts_with("whsec_"), "secret shape");
    assert_eq!(secret, env.key.webhook_secret.expose(), "key_webhook_secret is the secret given at creation");
    let other_secret = env
        .svc
        .create_key(NewApiKey { user_id: 8, environment: Environment::Sandbox, webhook_url: None })
        .expect("second key")
        .webhook_secret
        .expose()
        .to_string();
    assert_ne!(secret, other_secret);

    let mut seen = BTreeSet::new();
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert_eq!(request.target, "/hooks/coinorder?shop=1", "path and query are kept");
        let content_type = request.header("content-type").expect("content-type");
        assert!(content_type.starts_with("application/json"), "content-type {content_type}");

        // webhook-id is the event id; the body is the stored payload, byte for byte.
        let id = request.webhook_id();
        assert!(id.starts_with("msg_"), "webhook-id {id}");
        let event = env.svc.event(id).expect("webhook-id names a stored event");
        assert_eq!(request.body, event.payload.as_bytes(), "body of {id} is not the stored payload");
        let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
        assert_eq!(body["type"], event.event_type.as_str());
        assert_eq!(body["data"]["sequence"].to_string(), event.sequence.to_string());
        assert_eq!(body["data"]["order"]["order_id"], event.order_id.as_str());
        assert!(seen.insert(id.to_string()), "{id} delivered twice");

        // Headers: Unix seconds close to now, one v1 signature.
        let timestamp: i64 = request.header("webhook-timestamp").expect("webhook-timestamp").parse().expect("int");
        assert!((timestamp - env.now_secs()).abs() <= 10, "webhook-timestamp {timestamp} is not now");
        let signature = request.header("webhook-signature").expect("webhook-signature");
        assert!(signature.starts_with("v1,") && signature.len() == 3 + 44, "signature header {signature}");

        // Our verifier and the public package accept it...
        assert_eq!(our_verify(&secret, request, env.now_secs()), Ok(()), "our verifier on {id}");
        python_verify(&secret, request).unwrap_or_else(|e| panic!("standardwebhooks rejected {id}: {e}"));

        // ...and both reject a wrong secret or a changed body (the checks are not vacuous).
        assert_eq!(our_verify(&other_secret, request, env.now_secs()), Err(VerifyError::NoMatch));
        assert!(python_verify(&other_secret, request).is_err(), "python accepted a wrong secret");
        let mut tampered = request.body.clone();
        let last = tampered.len() - 2;
        tampered[last] = b' ';
        assert!(python_verify_parts(&secret, &request.headers, &tampered).is_err(), "python accepted a changed body");
        let changed = coinorder::signature::verify(
            &secret,
            request.header("webhook-id"),
            request.header("webhook-timestamp"),
            request.header("webhook-signature"),
            &tampered,
            env.now_secs(),
        );
        assert_eq!(changed, Err(VerifyError::NoMatch));
    }
    let expected: BTreeSet<String> = events.iter().map(|e| e.event_id.clone()).collect();
    assert_eq!(seen, expected, "every event delivered exactly once");
    for event in &events {
        let d = env.delivery(event);
        assert_eq!(d.state, DeliveryState::Delivered);
        assert!(d.delivered_at.is_some());
        assert_eq!(d.log.len(), 1);
        assert_eq!(d.log[0].status, Some(200));
        // Logged with its query values hidden: one may be a token.
        assert_eq!(d.log[0].url, url.replace("shop=1", "shop=***"));
    }
}

#[test]
fn deliveries_reuse_a_kept_alive_connection() {
    let rx = Receiver::start();
    let env = manual(|_| {});
    for _ in 0..5 {
        env.paid_order(Some(&rx.url()));
        assert_eq!(env.deliver().delivered, 1);
    }
    assert_eq!(rx.count(), 5);
    assert_eq!(rx.connections(), 1, "one keep-alive agent: five deliveries in a row over one connection");
}

// ----- Target resolution -----

#[test]
fn the_orders_webhook_url_wins_over_the_keys() {
    let on_order = Receiver::start();
    let on_key = Receiver::start();
    let env = manual(|_| {});
    env.svc.set_key_webhook_url(env.key_id(), Some(&on_key.url())).expect("set key url");
    let (_, event) = env.paid_order(Some(&on_order.url()));
    let report = env.deliver();
    assert_eq!((report.attempted, report.delivered), (1, 1), "{report:?}");
    assert_eq!(on_order.count(), 1);
    assert_eq!(on_order.requests()[0].webhook_id(), event.event_id);
    assert_eq!(on_key.count(), 0, "the key's URL must not be used when the order has one");
}

#[test]
fn a_target_urls_credentials_go_to_the_receiver_and_never_into_the_attempt_log() {
    let receiver = Receiver::start();
    let env = manual(|_| {});
    let target = format!("http://shop:s3cretPW@127.0.0.1:{}/hook?token=qTok123", receiver.port());
    let (_, event) = env.paid_order(Some(&target));
    assert_eq!(env.deliver().delivered, 1);
    let request = &receiver.requests()[0];
    assert_eq!(request.target, "/hook?token=qTok123", "the real URL is the one sent to");
    assert_eq!(request.header("authorization"), Some("Basic c2hvcDpzM2NyZXRQVw=="), "shop:s3cretPW");
    let logged = &env.delivery(&event).log[0].url;
    assert_eq!(logged, &format!("http://shop:***@127.0.0.1:{}/hook?token=***", receiver.port()));
}

#[test]
fn an_answer_holding_a_nul_byte_is_logged_on_every_backend() {
    // PostgreSQL's TEXT cannot hold U+0000: before, the write recording this attempt
    // failed there, and the event was sent again and again.
    let receiver = Receiver::start();
    receiver.push(Reply::status(500).body(b"bad\0answer".to_vec()));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&receiver.url()));
    let report = env.deliver();
    assert_eq!((report.delivered, report.retrying), (0, 1), "{report:?}");
    let log = env.delivery(&event).log;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].status, Some(500));
    assert_eq!(log[0].response_excerpt.as_deref(), Some("bad\u{FFFD}answer"));
}

#[test]
fn an_event_not_attempted_yet_is_due_since_it_was_made() {
    let env = manual(|_| {});
    let (_, event) = env.paid_order(None);
    let delivery = env.delivery(&event);
    assert_eq!((delivery.state, delivery.attempts), (DeliveryState::Pending, 0));
    assert_eq!(delivery.next_attempt_at, event.created_at, "not 1970");
}

#[test]
fn the_keys_webhook_url_is_read_at_dispatch_time() {
    let old = Receiver::start();
    let new = Receiver::start();
    let env = manual(|_| {});

    // Key without URL when the event is written; the URL is set afterwards.
    let (first_order, first) = env.paid_order(None);
    env.svc.set_key_webhook_url(env.key_id(), Some(&old.url())).expect("set key url");
    let (second_order, second) = env.paid_order(None);
    // Changed again after both events were written: the URL at dispatch counts.
    env.svc.set_key_webhook_url(env.key_id(), Some(&new.url())).expect("change key url");

    deliver_all(&env, &[&first_order, &second_order]);
    let ids: BTreeSet<String> = new.wait_for(2, WAIT).iter().map(|r| r.webhook_id().to_string()).collect();
    assert_eq!(ids, BTreeSet::from([first.event_id.clone(), second.event_id.clone()]));
    assert_eq!(old.count(), 0, "the key's URL at event time must not be used");
    assert_eq!(env.delivery(&first).log[0].url, new.url());
}

#[test]
fn no_url_anywhere_is_no_target_until_one_is_set_and_the_event_redelivered() {
    let env = manual(|_| {});
    let (_, event) = env.paid_order(None);
    let report = env.deliver();
    assert_eq!((report.attempted, report.no_target, report.delivered), (1, 1, 0), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!(d.state, DeliveryState::NoTarget);
    assert!(d.last_error.is_some(), "no_target says why");
    assert!(d.log.is_empty(), "no request was made: {:?}", d.log);

    let rx = Receiver::start();
    env.svc.set_key_webhook_url(env.key_id(), Some(&rx.url())).expect("set key url");
    env.svc.redeliver(&event.event_id).expect("redeliver");
    assert_eq!(env.delivery(&event).state, DeliveryState::Pending);
    let report = env.deliver();
    assert_eq!((report.attempted, report.delivered), (1, 1), "{report:?}");
    let requests = rx.wait_for(1, WAIT);
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].webhook_id(), event.event_id);
    assert_eq!(requests[0].body, event.payload.as_bytes());
    assert_eq!(env.delivery(&event).state, DeliveryState::Delivered);
}

// ----- Redelivery -----

#[test]
fn redelivery_resends_the_same_webhook_id_and_body() {
    let rx = Receiver::start();
    let env = real(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().delivered, 1);
    assert_eq!(env.delivery(&event).state, DeliveryState::Delivered);

    env.svc.redeliver(&event.event_id).expect("redeliver");
    let d = env.delivery(&event);
    assert_eq!(d.state, DeliveryState::Pending, "redeliver queues it again");
    let report = env.deliver();
    assert_eq!((report.attempted, report.delivered), (1, 1), "{report:?}");

    let requests = rx.wait_for(2, WAIT);
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.webhook_id(), event.event_id, "webhook-id is stable across redeliveries");
        assert_eq!(request.body, event.payload.as_bytes(), "the body is the same bytes");
        python_verify(&env.secret(), request).unwrap_or_else(|e| panic!("redelivery does not verify: {e}"));
    }
    let d = env.delivery(&event);
    assert_eq!(d.state, DeliveryState::Delivered);
    assert_eq!(d.log.len(), 2, "both sends are logged: {:?}", d.log);

    assert!(env.svc.redeliver("msg_doesnotexist0000000000").is_err(), "unknown event");
}

#[test]
fn a_failed_event_can_be_redelivered() {
    let rx = Receiver::start();
    rx.push(Reply::status(410));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().failed, 1);
    assert_eq!(env.delivery(&event).state, DeliveryState::Failed);
    env.svc.redeliver(&event.event_id).expect("redeliver");
    assert_eq!(env.deliver().delivered, 1);
    let requests = rx.wait_for(2, WAIT);
    assert_eq!(requests[0].webhook_id(), requests[1].webhook_id());
    assert_eq!(requests[0].body, requests[1].body);
    assert_eq!(env.delivery(&event).state, DeliveryState::Delivered);
}

// ----- Per-order ordering -----

#[test]
fn per_order_events_are_first_attempted_in_sequence_order() {
    let rx = Receiver::start();
    // Slow answers, so events sent side by side would overlap and race.
    rx.set_default(Reply::slow(Duration::from_millis(100), 200));
    let env = manual(|c| c.delivery_concurrency = 8);
    // Four events per order, all written at the same instant (so only `sequence` tells
    // them apart): order.pending, order.failed, order.paid_late, order.paid.
    let mut orders = Vec::new();
    for _ in 0..6 {
        let id = env.order(Some(&rx.url()));
        env.pay(&id, "4");
        env.svc.simulate(&id, &SimulateAction::Expire).expect("expire");
        env.pay(&id, "6");
        env.svc.mark_paid(&id).expect("mark paid");
        let types: Vec<_> =
            env.svc.order_events(&id).expect("events").iter().map(|e| (e.sequence, e.event_type)).collect();
        assert_eq!(
            types,
            [(1, EventType::Pending), (2, EventType::Failed), (3, EventType::PaidLate), (4, EventType::Paid)],
            "events of {id}"
        );
        orders.push(id);
    }
    let sequence_of: HashMap<String, (String, i64)> = orders
        .iter()
        .flat_map(|id| env.svc.order_events(id).expect("events"))
        .map(|e| (e.event_id.clone(), (e.order_id.clone(), e.sequence)))
        .collect();
    assert_eq!(sequence_of.len(), 24);

    // One round with room for everything: no later event may arrive before its order's
    // earlier one had its first attempt answered (answers are held 100 ms, so events sent
    // side by side would overlap).
    env.deliver();
    let check = |requests: &[Recorded]| {
        for request in requests {
            let (order, sequence) = &sequence_of[request.webhook_id()];
            if *sequence == 1 {
                continue;
            }
            let earlier = requests
                .iter()
                .filter(|r| sequence_of[r.webhook_id()] == (order.clone(), sequence - 1))
                .filter_map(|r| r.answered)
                .min();
            assert!(
                earlier.is_some_and(|answered| answered <= request.at),
                "order {order}: event {sequence} arrived before event {}'s first attempt was answered",
                sequence - 1
            );
        }
    };
    check(&rx.requests());

    let refs: Vec<&str> = orders.iter().map(String::as_str).collect();
    deliver_all(&env, &refs);
    let requests = rx.requests();
    check(&requests);
    assert_eq!(requests.len(), 24, "each event once");
}

#[test]
fn a_second_deliverer_waits_while_an_earlier_event_of_the_order_is_in_flight() {
    let rx = Receiver::start();
    // The first answer is held, so event 1's attempt is still in flight in one deliverer
    // when another (a second process, `webhooks deliver`) looks for work.
    rx.push(Reply::slow(Duration::from_millis(1_500), 200));
    let env = manual(|_| {});
    let other = Service::open(env.db_path(), env.svc.config().clone()).expect("second service");
    let order = env.order(Some(&rx.url()));
    let pending = env.pay(&order, "4").remove(0);
    let paid = env.pay(&order, "6").remove(0);

    std::thread::scope(|scope| {
        let first = scope.spawn(|| env.svc.deliver_due(100).expect("deliver (first service)"));
        assert_eq!(rx.wait_for(1, WAIT)[0].webhook_id(), pending.event_id, "event 1 is being sent");
        let meanwhile = other.deliver_due(100).expect("deliver (second service)");
        assert_eq!(meanwhile.attempted, 0, "event 2 must wait for event 1's attempt: {meanwhile:?}");
        // Once event 1 is answered, the first deliverer goes on with event 2 itself.
        assert_eq!(first.join().expect("join").delivered, 2);
    });
    assert_eq!(other.deliver_due(100).expect("deliver").attempted, 0, "nothing is left");
    let ids: Vec<String> = rx.requests().iter().map(|r| r.webhook_id().to_string()).collect();
    assert_eq!(ids, [pending.event_id, paid.event_id]);
}

#[test]
fn a_failing_earlier_event_does_not_hold_back_the_next_one_forever() {
    let rx = Receiver::start();
    rx.push(Reply::status(500));
    let env = manual(|_| {});
    let order = env.order(Some(&rx.url()));
    let pending = env.pay(&order, "4").remove(0);
    let paid = env.pay(&order, "6").remove(0);

    // Event 1 fails; once it was attempted, event 2 may go (the clock does not move, so
    // event 1 is not due again).
    for _ in 0..3 {
        env.deliver();
    }
    let requests = rx.wait_for(2, WAIT);
    assert_eq!(requests.len(), 2, "event 1 once, event 2 once: {requests:?}");
    assert_eq!(requests[0].webhook_id(), pending.event_id, "event 1 first");
    assert_eq!(requests[1].webhook_id(), paid.event_id);
    assert_eq!(env.delivery(&paid).state, DeliveryState::Delivered);
    assert_eq!(env.delivery(&pending).state, DeliveryState::Pending, "event 1 waits for its retry");
}

#[test]
fn an_event_whose_signing_secret_cannot_be_read_is_retried_without_holding_up_the_others() {
    let rx = Receiver::start();
    let env = manual(|_| {});
    let (_, good) = env.paid_order(Some(&rx.url()));
    let other_key = env
        .svc
        .create_key(NewApiKey { user_id: 8, environment: Environment::Sandbox, webhook_url: None })
        .expect("second key");
    let other = env.svc.authenticate(Some(other_key.plain_key.expose())).expect("authenticate");
    let request = coinorder::CreateOrder {
        currency: "USD".into(),
        amount: coinorder::money::Decimal::TEN,
        webhook_url: Some(rx.url()),
        ..Default::default()
    };
    let order = env.svc.create_order(&other, &request).expect("order").order.order.order_id;
    let broken = env.pay(&order, "10").remove(0);
    // The second key's sealed secret is damaged on disk.
    let mut db = RawDb::open(&env.db_path());
    let changed = db.execute("UPDATE api_keys SET webhook_secret_enc = 'damaged' WHERE id = ?1", &[&other_key.key.id]);
    assert_eq!(changed, 1);

    let report = env.deliver();
    assert_eq!((report.attempted, report.delivered, report.retrying), (2, 1, 1), "{report:?}");
    assert_eq!(rx.wait_for(1, WAIT)[0].webhook_id(), good.event_id);
    let d = env.delivery(&broken);
    assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 1));
    let error = d.last_error.unwrap_or_default();
    assert!(error.starts_with("no target: "), "{error}");
    assert!(d.next_attempt_at.0 > env.now_ms(), "retried on the schedule, not leased forever");
}

#[test]
fn a_slow_receiver_holds_up_only_its_own_webhook_and_a_retry_is_timed_from_its_failure() {
    let slow = Receiver::start();
    slow.set_default(Reply::slow(Duration::from_secs(3), 200)); // answered before the retry is due
    let failing = Receiver::start();
    failing.set_default(Reply::status(500));
    let fast = Receiver::start();
    let env = real(|c| c.delivery_concurrency = 4);
    let (_, slow_event) = env.paid_order(Some(&slow.url()));
    let (_, failing_event) = env.paid_order(Some(&failing.url()));
    let svc = Arc::new(Service::open(env.db_path(), env.svc.config().clone()).expect("service"));
    let delivering = {
        let svc = Arc::clone(&svc);
        std::thread::spawn(move || svc.deliver_due(100).expect("deliver_due"))
    };
    slow.wait_for(1, WAIT);
    failing.wait_for(1, WAIT);
    // Written while the slow receiver is still answering: a free sender takes it meanwhile.
    let (_, fresh_event) = env.paid_order(Some(&fast.url()));
    fast.wait_for(1, WAIT);
    let recorded = (0..200).find(|_| {
        std::thread::sleep(Duration::from_millis(25));
        env.delivery(&fresh_event).state == DeliveryState::Delivered
    });
    assert!(recorded.is_some(), "the fresh event is recorded as delivered");
    let in_flight = env.delivery(&slow_event);
    assert_eq!((in_flight.state, in_flight.attempts), (DeliveryState::Pending, 1), "the slow one is still out");
    assert!(in_flight.log.is_empty(), "and not logged yet: {:?}", in_flight.log);

    // The failure was recorded as it happened, and its retry is due 5 s ± 20 % after it,
    // not after the slow receiver's answer.
    let failed = env.delivery(&failing_event);
    assert_eq!((failed.state, failed.attempts, failed.log.len()), (DeliveryState::Pending, 1, 1), "{failed:?}");
    let after_failure = failed.next_attempt_at.0 - failed.log[0].started_at.0;
    assert!((4_000..=6_000 + failed.log[0].latency_ms).contains(&after_failure), "retry {after_failure} ms after");

    let report = delivering.join().expect("the delivering thread");
    assert_eq!((report.attempted, report.delivered, report.retrying), (3, 2, 1), "{report:?}");
    assert_eq!(env.delivery(&slow_event).state, DeliveryState::Delivered);
}

#[test]
fn stopping_the_delivery_worker_waits_for_the_webhooks_in_flight_only() {
    let rx = Receiver::start();
    rx.set_default(Reply::slow(Duration::from_millis(400), 200));
    let env = manual(|c| c.delivery_concurrency = 2);
    let events: Vec<_> = (0..8).map(|_| env.paid_order(Some(&rx.url())).1).collect();
    let svc = Arc::new(Service::open(env.db_path(), env.svc.config().clone()).expect("service"));
    let mut worker = svc.start_delivery_worker(Duration::from_secs(3600), 100).expect("worker");
    rx.wait_for(2, WAIT);
    worker.stop(); // while the first two are being answered (400 ms each, side by side)
    let attempted: Vec<i64> = events.iter().map(|event| env.delivery(event).attempts).collect();
    let delivered = events.iter().filter(|event| env.delivery(event).state == DeliveryState::Delivered).count();
    // Two per sender were leased (the one being sent and the next); the two being sent
    // were sent and recorded before the stop returned, the two behind them given back
    // unattempted, free for the next deliverer at once.
    assert_eq!(attempted.iter().filter(|a| **a == 1).count(), 2, "{attempted:?}");
    assert_eq!(delivered, 2, "sent and recorded before the stop returned");
    assert_eq!(attempted.iter().filter(|a| **a == 0).count(), 6, "the rest are unattempted: {attempted:?}");
    assert_eq!(rx.count(), 2);
    assert_eq!(svc.deliver_due(100).expect("deliver").delivered, 6, "none waits for a lease to run out");
}

#[test]
fn the_delivery_worker_sends_a_retry_when_it_comes_due_not_at_its_next_interval() {
    let rx = Receiver::start();
    rx.push(Reply::status(500));
    let env = real(|c| c.retry_schedule = vec![Duration::from_millis(400)]);
    let (_, event) = env.paid_order(Some(&rx.url()));
    let svc = Arc::new(Service::open(env.db_path(), env.svc.config().clone()).expect("service"));
    // An interval far longer than the wait: the retry must not wait for the next tick.
    let mut worker = svc.start_delivery_worker(Duration::from_secs(120), 100).expect("worker");
    let requests = rx.wait_for(2, Duration::from_secs(30));
    worker.stop();
    assert_eq!(requests.len(), 2, "the retry went out when it came due");
    let gap = requests[1].at - requests[0].at;
    // Scheduled 400 ms ± 20 % after the failed attempt ended.
    assert!(gap >= Duration::from_millis(300) && gap < Duration::from_secs(10), "{gap:?}");
    assert_eq!(env.delivery(&event).state, DeliveryState::Delivered);
}

// ----- Secret rotation -----

#[test]
fn after_rotating_the_secret_deliveries_verify_with_the_new_secret_only() {
    let rx = Receiver::start();
    let env = real(|_| {});
    let old = env.secret();
    let (_, before) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().delivered, 1);
    let first = rx.wait_for(1, WAIT).remove(0);
    python_verify(&old, &first).expect("signed with the secret of the time");

    let new = env.svc.rotate_key_webhook_secret(env.key_id()).expect("rotate").expose().to_string();
    assert!(new.starts_with("whsec_"));
    assert_ne!(new, old);
    assert_eq!(env.secret(), new, "key_webhook_secret returns the new secret");

    let (_, after) = env.paid_order(Some(&rx.url()));
    env.svc.redeliver(&before.event_id).expect("redeliver");
    deliver_all(&env, &[&before.order_id, &after.order_id]);
    let requests = rx.wait_for(3, WAIT);
    assert_eq!(requests.len(), 3);
    for request in &requests[1..] {
        let id = request.webhook_id();
        assert!(id == after.event_id || id == before.event_id);
        assert_eq!(our_verify(&new, request, env.now_secs()), Ok(()), "{id} with the new secret");
        python_verify(&new, request).unwrap_or_else(|e| panic!("{id} does not verify with the new secret: {e}"));
        assert_eq!(our_verify(&old, request, env.now_secs()), Err(VerifyError::NoMatch), "{id} with the old");
        assert!(python_verify(&old, request).is_err(), "{id} still verifies with the old secret");
    }
}

#[test]
fn a_rotation_that_keeps_the_old_secret_signs_with_both_and_the_standard_library_takes_either() {
    let rx = Receiver::start();
    let env = real(|_| {});
    let old = env.secret();
    let keep = Duration::from_secs(3600);
    let new =
        env.svc.rotate_key_webhook_secret_keeping_old(env.key_id(), keep).expect("rotate").secret.expose().to_string();
    assert_ne!(new, old);
    assert_eq!(env.secret(), new, "the new secret is the key's from now on");
    let (_, event) = env.paid_order(Some(&rx.url()));
    deliver_all(&env, &[&event.order_id]);
    let request = rx.wait_for(1, WAIT).remove(0);
    let header = request.header("webhook-signature").expect("signed").to_string();
    assert_eq!(header.split(' ').filter(|part| part.starts_with("v1,")).count(), 2, "{header}");
    for (which, secret) in [("new", &new), ("old", &old)] {
        assert_eq!(our_verify(secret, &request, env.now_secs()), Ok(()), "ours, with the {which} secret");
        python_verify(secret, &request).unwrap_or_else(|e| panic!("standardwebhooks, with the {which} secret: {e}"));
    }
    let stranger = "whsec_c3RyYW5nZXItc2VjcmV0LTMyLWJ5dGVzLWxvbmctb2s=";
    assert!(python_verify(stranger, &request).is_err(), "any secret at all verifies");
}

#[test]
fn the_old_secret_stops_signing_when_its_time_is_up_or_at_the_next_rotation() {
    let rx = Receiver::start();
    let env = manual(|_| {});
    let first = env.secret();
    let rotated = env.svc.rotate_key_webhook_secret_keeping_old(env.key_id(), Duration::from_secs(60)).expect("rotate");
    assert_eq!(rotated.old_secret_signs_until.map(|until| until.as_millis()), Some(env.now_ms() + 60_000));
    let second = rotated.secret.expose().to_string();
    let (_, event) = env.paid_order(Some(&rx.url()));
    let verifies = |secret: &str, request: &Recorded| our_verify(secret, request, env.now_secs()).is_ok();
    let rotate_keeping_old = || {
        let rotated = env.svc.rotate_key_webhook_secret_keeping_old(env.key_id(), Duration::from_secs(60));
        rotated.expect("rotate").secret.expose().to_string()
    };
    // The event's next delivery (the `count`th request), after a redelivery but the first.
    let delivery = |count: usize| {
        if count > 1 {
            env.svc.redeliver(&event.event_id).expect("redeliver");
        }
        deliver_all(&env, &[&event.order_id]);
        rx.wait_for(count, WAIT).remove(count - 1)
    };
    let request = delivery(1);
    assert!(verifies(&first, &request) && verifies(&second, &request));

    // 60 s later the first secret no longer signs: a redelivery carries one signature.
    env.advance(60_000);
    let request = delivery(2);
    assert_eq!(request.header("webhook-signature").map(|h| h.split(' ').count()), Some(1));
    assert!(verifies(&second, &request) && !verifies(&first, &request));

    // Two rotations in a row: only the secret the last one replaced goes on signing.
    let third = rotate_keeping_old();
    let fourth = rotate_keeping_old();
    let request = delivery(3);
    assert!(verifies(&fourth, &request) && verifies(&third, &request));
    assert!(!verifies(&second, &request), "an older secret still signs");

    // A rotation without overlap ends the one before at once.
    let fifth = env.svc.rotate_key_webhook_secret(env.key_id()).expect("rotate").expose().to_string();
    let request = delivery(4);
    assert!(verifies(&fifth, &request) && !verifies(&fourth, &request));

    // Deleting the key ends an overlap too: its orders are signed with its last secret.
    let sixth = rotate_keeping_old();
    env.svc.delete_key(env.key_id()).expect("delete");
    let request = delivery(5);
    assert!(verifies(&sixth, &request) && !verifies(&fifth, &request));
}

#[test]
fn an_overlap_longer_than_thirty_days_is_refused_naming_it() {
    let env = manual(|_| {});
    let before = env.secret();
    let too_long = coinorder::MAX_SECRET_OVERLAP + Duration::from_secs(1);
    let error = env.svc.rotate_key_webhook_secret_keeping_old(env.key_id(), too_long).expect_err("over 30 days");
    assert_eq!(error.error_code(), "PARAMETERS_MISSING");
    assert_eq!(error.to_string(), "keep_old_for: at most 2592000 seconds (30 days)");
    assert_eq!(env.secret(), before, "nothing rotated");
    env.svc
        .rotate_key_webhook_secret_keeping_old(env.key_id(), coinorder::MAX_SECRET_OVERLAP)
        .expect("30 days is fine");
}

// ----- Live mode and private targets -----

#[test]
fn live_refuses_a_loopback_target_unless_allowed() {
    let rx = Receiver::start();
    // A lenient service writes orders with loopback targets (as if their DNS answer
    // changed after they were accepted); the strict one must still refuse to send.
    let lenient = open(Environment::Live, true, |c| c.allow_private_webhook_targets = true);
    let (_, on_order) = lenient.paid_order(Some(&rx.url()));
    lenient
        .svc
        .set_key_webhook_url(lenient.key_id(), Some(&format!("http://localhost:{}/hook", rx.port())))
        .expect("key url");
    let (_, on_key) = lenient.paid_order(None);
    let mut config = coinorder::Config::new(Environment::Live);
    config.clock = Arc::new(coinorder::ManualClock::new(lenient.now_ms()));
    config.secret_key_path = support::backend::shared_key_file();
    let strict = Service::open(lenient.db_path(), config).expect("strict service");
    assert!(!strict.config().allow_private_webhook_targets, "refusing is the default");

    // Refused up front: an order or a key naming a private target.
    let request = coinorder::CreateOrder {
        currency: "USD".into(),
        amount: coinorder::money::Decimal::TEN,
        pay_currency: Some("USDT".into()),
        webhook_url: Some(rx.url()),
        ..Default::default()
    };
    let refused = strict.create_order(&lenient.merchant, &request).expect_err("private target at create");
    assert_eq!(refused.error_code(), "PARAMETERS_MISSING");
    assert!(
        refused.to_string().starts_with("webhook_url: ") && refused.to_string().contains("non-public"),
        "{refused}"
    );
    let refused = strict.set_key_webhook_url(lenient.key_id(), Some("http://10.0.0.1/hook")).expect_err("key target");
    assert!(refused.to_string().contains("non-public"), "{refused}");

    // And at dispatch.
    let report = strict.deliver_due(100).expect("deliver");
    assert_eq!((report.attempted, report.failed, report.delivered), (2, 2, 0), "{report:?}");
    for event in [&on_order, &on_key] {
        let d = strict.event_deliveries(&event.order_id).expect("deliveries").pop().expect("delivery");
        assert_eq!(d.state, DeliveryState::Failed, "{}", event.event_id);
        let error = d.last_error.clone().unwrap_or_default();
        assert!(error.contains("non-public address"), "error should name the non-public address: {error:?}");
    }
    assert_eq!(strict.deliver_due(100).expect("deliver").attempted, 0, "given up for good");
    assert_eq!(rx.count(), 0, "nothing may reach a private address in live");
}

#[test]
fn an_identical_retry_of_a_create_accepted_under_looser_rules_replays_it() {
    // An order written while private targets were allowed (or by an older version with
    // looser rules): its identical retry must replay the 201 (DESIGN §5), not tell the
    // merchant that an order which exists was refused.
    let rx = Receiver::start();
    let lenient = open(Environment::Live, true, |c| c.allow_private_webhook_targets = true);
    let request = coinorder::CreateOrder {
        merchant_order_id: Some("cart-upgraded".into()),
        currency: "USD".into(),
        amount: coinorder::money::Decimal::TEN,
        pay_currency: Some("USDT".into()),
        webhook_url: Some(rx.url()),
        ..Default::default()
    };
    let first = lenient.svc.create_order(&lenient.merchant, &request).expect("accepted while allowed");
    let mut config = coinorder::Config::new(Environment::Live);
    config.clock = Arc::new(coinorder::ManualClock::new(lenient.now_ms()));
    config.secret_key_path = support::backend::shared_key_file();
    let strict = Service::open(lenient.db_path(), config).expect("strict service");

    let retry = strict.create_order(&lenient.merchant, &request).expect("the identical retry replays");
    assert!(retry.replayed);
    assert_eq!(retry.order.order.order_id, first.order.order.order_id);
    assert_eq!(retry.response_body, first.response_body);

    // Anything but the identical request still gets today's refusal.
    let other_amount = coinorder::CreateOrder { amount: coinorder::money::Decimal::ONE, ..request.clone() };
    let other_id = coinorder::CreateOrder { merchant_order_id: Some("cart-new".into()), ..request.clone() };
    for different in [other_amount, other_id] {
        let refused = strict.create_order(&lenient.merchant, &different).expect_err("private target");
        assert!(refused.to_string().starts_with("webhook_url: "), "{refused}");
    }
}

#[test]
fn live_retries_a_target_whose_name_cannot_be_resolved_now() {
    // `.invalid` never resolves (RFC 6761): a DNS outage must delay a live webhook, not
    // fail it for good, and it must not refuse the order either.
    let env = open(Environment::Live, true, |c| c.webhook_timeout = Duration::from_secs(5));
    assert!(!env.svc.config().allow_private_webhook_targets);
    let (order_id, event) = env.paid_order(Some("http://no-such-host.invalid/hook"));
    for attempt in 1..=2 {
        let report = env.deliver();
        assert_eq!((report.attempted, report.retrying, report.failed), (1, 1, 0), "attempt {attempt}: {report:?}");
        let d = env.delivery(&event);
        assert_eq!((d.state, d.attempts), (DeliveryState::Pending, attempt), "{:?}", d.last_error);
        assert!(!d.last_error.clone().unwrap_or_default().contains("non-public"), "{:?}", d.last_error);
        env.advance(d.next_attempt_at.0 - env.now_ms());
    }
    assert_eq!(env.deliveries(&order_id).len(), 1);
}

#[test]
fn live_sends_to_a_loopback_target_when_configured_to_allow_it() {
    let rx = Receiver::start();
    let env = open(Environment::Live, true, |c| c.allow_private_webhook_targets = true);
    let (_, event) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().delivered, 1);
    assert_eq!(rx.wait_for(1, WAIT)[0].webhook_id(), event.event_id);
    let body: Value = serde_json::from_slice(&rx.requests()[0].body).expect("json");
    assert_eq!(body["type"], "order.paid");
}

#[test]
fn sandbox_sends_to_a_loopback_target() {
    let rx = Receiver::start();
    let env = manual(|_| {});
    assert!(!env.svc.config().allow_private_webhook_targets);
    let (_, event) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().delivered, 1);
    assert_eq!(rx.wait_for(1, WAIT)[0].webhook_id(), event.event_id);
}

// ----- Leases: two services on one file -----

#[test]
fn two_services_delivering_at_once_send_each_event_exactly_once() {
    let rx = Receiver::start();
    rx.set_default(Reply::slow(Duration::from_millis(20), 200));
    let env = manual(|_| {});
    let other = Arc::new(Service::open(env.db_path(), env.svc.config().clone()).expect("second service"));
    let mut all = BTreeSet::new();
    for round in 0..4 {
        let mut events = BTreeSet::new();
        for _ in 0..12 {
            events.insert(env.paid_order(Some(&rx.url())).1.event_id);
        }
        let barrier = Barrier::new(2);
        let (mine, theirs) = std::thread::scope(|scope| {
            let theirs = scope.spawn(|| {
                barrier.wait();
                other.deliver_due(100).expect("deliver (second service)")
            });
            barrier.wait();
            let mine = env.svc.deliver_due(100).expect("deliver (first service)");
            (mine, theirs.join().expect("join"))
        });
        assert_eq!(mine.attempted + theirs.attempted, 12, "round {round}: {mine:?} + {theirs:?}");
        assert_eq!(mine.delivered + theirs.delivered, 12, "round {round}: {mine:?} + {theirs:?}");
        all.extend(events);
    }
    let requests = rx.wait_for(all.len(), WAIT);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for request in &requests {
        *counts.entry(request.webhook_id().to_string()).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(counts.keys().cloned().collect::<BTreeSet<_>>(), all, "every event arrived");
    assert_eq!(requests.len(), 48);
}

#[test]
fn a_lease_lasts_as_long_as_the_round_that_holds_it() {
    // One service works through a long round: 9 events, one at a time, each answered
    // slowly but within the 5 s timeout (4.5 s of service-clock time each). Meanwhile a
    // second service on the same file runs a round. The events the first one still holds
    // (the one in flight, those queued behind it) must not be sent by the second one too.
    let rx = Receiver::start();
    rx.set_default(Reply::slow(Duration::from_millis(200), 200));
    let env = manual(|c| {
        c.delivery_concurrency = 1;
        c.webhook_timeout = Duration::from_secs(5);
    });
    let other = Service::open(env.db_path(), env.svc.config().clone()).expect("second service");
    let events: BTreeSet<String> = (0..9).map(|_| env.paid_order(Some(&rx.url())).1.event_id).collect();

    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| env.svc.deliver_due(100).expect("deliver (first service)"));
        for n in 1..=8 {
            rx.wait_for(n, WAIT);
            env.advance(4_500); // request n takes 4.5 s of the 5 s timeout
        }
        // 36 s after the round began, request 8 is in flight and 9 is queued.
        let second = other.deliver_due(100).expect("deliver (second service)");
        (first.join().expect("join"), second)
    });
    let requests = rx.wait_for(9, WAIT);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for request in &requests {
        *counts.entry(request.webhook_id().to_string()).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent by both services (first round {first:?}, second round {second:?}): {twice:?}");
    assert_eq!(counts.keys().cloned().collect::<BTreeSet<_>>(), events);
}

// ----- Secrets stay out of Debug -----

#[test]
fn debug_output_of_service_and_config_never_shows_a_signing_secret() {
    let rx = Receiver::start();
    let env = manual(|c| {
        c.smtp = Some(SmtpConfig {
            url: "smtp://user:pa55word@127.0.0.1:2525".into(),
            from: "Shop <pay@shop.example>".into(),
        })
    });
    let first = env.secret();
    let (_, _) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().delivered, 1);
    let rotated = env.svc.rotate_key_webhook_secret(env.key_id()).expect("rotate").expose().to_string();
    let outputs = [
        format!("{:?}", env.svc),
        format!("{:#?}", env.svc),
        format!("{:?}", env.svc.config()),
        format!("{:#?}", env.svc.config()),
        format!("{:?}", env.key),
    ];
    for text in &outputs {
        assert!(!text.contains("whsec_"), "Debug output shows a whsec_ secret: {text}");
        for secret in [&first, &rotated] {
            let raw = secret.trim_start_matches("whsec_");
            assert!(!text.contains(raw), "Debug output shows the secret's key material: {text}");
        }
        assert!(!text.contains("pa55word"), "Debug output shows the SMTP password: {text}");
    }
}

#[test]
fn deleting_the_key_does_not_drop_its_orders_webhooks() {
    let rx = Receiver::start();
    let env = manual(|_| {});
    let secret = env.secret();
    let order_id = env.order(Some(&rx.url()));
    env.svc.delete_key(env.key_id()).expect("delete key");
    let events = env.pay(&order_id, "10");
    assert_eq!(env.deliver().delivered, events.len());
    let received = rx.wait_for(events.len(), WAIT);
    assert_eq!(received.len(), events.len());
    for request in &received {
        assert_eq!(our_verify(&secret, request, env.now_secs()), Ok(()), "signed with the deleted key's last secret");
    }
}

/// What the host's observer heard: (event id, outcome) of each webhook attempt.
#[derive(Debug, Default)]
struct HeardAttempts(std::sync::Mutex<Vec<(String, String)>>);

impl coinorder::Observer for HeardAttempts {
    fn webhook_attempted(&self, event_id: &str, _attempt: &coinorder::WebhookAttempt, outcome: &str) {
        self.0.lock().expect("lock").push((event_id.to_string(), outcome.to_string()));
    }
}

#[test]
fn an_attempt_whose_outcome_cannot_be_written_is_still_told_to_the_observer_and_sent_again() {
    if backend::on_postgres() {
        return; // the failing write is made with a SQLite trigger
    }
    let receiver = Receiver::start();
    let heard = Arc::new(HeardAttempts::default());
    let observer: Arc<dyn coinorder::Observer> = heard.clone();
    let env = manual(|config| config.observer = Some(observer));
    let (_, event) = env.paid_order(Some(&receiver.url()));
    // The database refuses the attempt's log row, as a full disk refuses any write.
    let db = rusqlite::Connection::open(env.db_path()).expect("open");
    db.execute_batch(
        "CREATE TRIGGER refuse_attempts BEFORE INSERT ON webhook_attempts
         BEGIN SELECT RAISE(ABORT, 'database or disk is full (test)'); END;",
    )
    .expect("trigger");
    let refused = env.svc.deliver_due(100).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("disk is full (test)"), "{refused}");
    assert_eq!(receiver.requests().len(), 1, "the attempt was made");
    assert_eq!(*heard.0.lock().expect("lock"), [(event.event_id.clone(), "unrecorded".to_string())]);
    assert_eq!(env.delivery(&event).state, DeliveryState::Pending, "nothing recorded: sent again later");

    db.execute_batch("DROP TRIGGER refuse_attempts").expect("drop");
    env.clock.as_ref().expect("manual clock").advance_ms(10 * 60 * 1000); // past the lease
    assert_eq!(env.deliver().delivered, 1);
    assert_eq!(heard.0.lock().expect("lock").last(), Some(&(event.event_id.clone(), "delivered".to_string())));
    assert_eq!(receiver.requests().len(), 2);
}

#[test]
fn a_follower_returns_the_events_written_after_the_clock_was_set_back() {
    let env = manual(|_| {});
    let clock = env.clock.clone().expect("manual clock");
    let mut follower = env.svc.follow_events(coinorder::Timestamp(env.now_ms()));
    let (_, first) = env.paid_order(None);
    let ids = |events: Vec<coinorder::Event>| events.into_iter().map(|e| e.event_id).collect::<Vec<_>>();
    assert_eq!(ids(follower.poll(&env.svc).expect("poll")), [first.event_id]);
    // An NTP step a minute back: the next events carry earlier times than the first.
    clock.advance_ms(-60_000);
    let (_, second) = env.paid_order(None);
    clock.advance_ms(500);
    assert_eq!(ids(follower.poll(&env.svc).expect("poll")), [second.event_id]);
    let (_, third) = env.paid_order(None);
    clock.advance_ms(500);
    assert_eq!(ids(follower.poll(&env.svc).expect("poll")), [third.event_id], "each once");
    // Once the clock is past the first again, nothing is returned twice.
    clock.advance_ms(120_000);
    let (_, fourth) = env.paid_order(None);
    assert_eq!(ids(follower.poll(&env.svc).expect("poll")), [fourth.event_id]);
    assert!(follower.poll(&env.svc).expect("poll").is_empty());
}

#[test]
fn a_follower_from_a_later_time_returns_nothing_made_before_it() {
    let env = manual(|_| {});
    let clock = env.clock.clone().expect("manual clock");
    let mut follower = env.svc.follow_events(coinorder::Timestamp(env.now_ms() + 60_000));
    env.paid_order(None);
    clock.advance_ms(30_000);
    env.paid_order(None);
    assert!(follower.poll(&env.svc).expect("poll").is_empty(), "both were made before `from`");
    clock.advance_ms(31_000);
    let (_, after) = env.paid_order(None);
    let ids: Vec<String> = follower.poll(&env.svc).expect("poll").into_iter().map(|e| e.event_id).collect();
    assert_eq!(ids, [after.event_id]);
}

// ----- E-mail and webhooks on their own threads -----

/// A mail server that accepts connections and never says a word, so an SMTP client
/// waits out its whole timeout (or until the server hangs up, `hold` after accepting);
/// `release` hangs up on every connection it holds.
struct SilentMailServer {
    port: u16,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    release: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentMailServer {
    fn start() -> SilentMailServer {
        SilentMailServer::holding(Duration::from_secs(3600))
    }

    fn holding(hold: Duration) -> SilentMailServer {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let thread = {
            let (accepted, release) = (Arc::clone(&accepted), Arc::clone(&release));
            std::thread::spawn(move || {
                let mut held = Vec::new();
                while !release.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            held.push((stream, std::time::Instant::now()));
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                    held.retain(|(_, at)| at.elapsed() < hold);
                }
            })
        };
        SilentMailServer { port, accepted, release, thread: Some(thread) }
    }

    fn release(&mut self) {
        self.release.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for SilentMailServer {
    fn drop(&mut self) {
        self.release();
    }
}

/// A 10 USD order with, or without, a customer's e-mail and a webhook URL.
fn order(email: Option<&str>, webhook_url: Option<String>) -> coinorder::CreateOrder {
    coinorder::CreateOrder {
        currency: "USD".into(),
        amount: coinorder::money::Decimal::TEN,
        customer_email: email.map(str::to_string),
        webhook_url,
        ..Default::default()
    }
}

#[test]
fn a_webhook_receiver_that_never_answers_does_not_hold_up_emails() {
    let rx = Receiver::start();
    rx.set_default(Reply::slow(Duration::from_secs(60), 200));
    let mut sink = smtp_support::SmtpSink::start();
    let Env { dir, svc, merchant, .. } = real(|c| {
        c.smtp = Some(SmtpConfig { url: sink.url(), from: "Shop <pay@shop.example>".into() });
        c.webhook_timeout = Duration::from_secs(90);
    });
    let svc = Arc::new(svc);
    let paid = svc.create_order(&merchant, &order(None, Some(rx.url()))).expect("order with a webhook");
    svc.simulate(&paid.order.order.order_id, &SimulateAction::Pay { amount: None, confirmed: true }).expect("pay");
    let mut worker = svc.start_delivery_worker(Duration::from_millis(50), 100).expect("start worker");
    assert_eq!(rx.wait_for(1, WAIT).len(), 1, "the webhook went out");

    // The webhook now waits a minute for its answer; a payment link e-mailed meanwhile
    // goes out all the same.
    svc.create_order(&merchant, &order(Some("alice@customer.example"), None)).expect("order with an e-mail");
    worker.wake();
    let received = sink.wait_for(1, WAIT);
    assert_eq!(received.len(), 1, "the e-mail waited for the webhook");

    drop(rx); // hangs up on the webhook, so stopping does not wait a minute
    worker.stop();
    assert!(!worker.is_running());
    sink.stop();
    drop(dir);
}

#[test]
fn stopping_tells_the_email_thread_at_once_and_gives_back_waiting_webhooks() {
    use std::sync::atomic::Ordering;
    let rx = Receiver::start();
    rx.set_default(Reply::slow(Duration::from_secs(60), 200));
    // Each e-mail takes a second: the server hangs up on it then.
    let mut mail = SilentMailServer::holding(Duration::from_secs(1));
    let Env { dir, svc, merchant, .. } = real(|c| {
        c.smtp =
            Some(SmtpConfig { url: format!("smtp://127.0.0.1:{}", mail.port), from: "Shop <pay@shop.example>".into() });
        c.webhook_timeout = Duration::from_secs(4);
        c.delivery_concurrency = 1;
    });
    let svc = Arc::new(svc);
    for _ in 0..6 {
        svc.create_order(&merchant, &order(Some("alice@customer.example"), None)).expect("order with an e-mail");
    }
    // Two events for one sender: one is sent (and hangs), the other waits behind it.
    let mut events = Vec::new();
    for _ in 0..2 {
        let paid = svc.create_order(&merchant, &order(None, Some(rx.url()))).expect("order with a webhook");
        svc.simulate(&paid.order.order.order_id, &SimulateAction::Pay { amount: None, confirmed: true }).expect("pay");
        events.extend(svc.order_events(&paid.order.order.order_id).expect("events"));
    }
    let mut worker = svc.start_delivery_worker(Duration::from_millis(50), 100).expect("start worker");
    assert_eq!(rx.wait_for(1, WAIT).len(), 1, "a webhook went out");
    let deadline = std::time::Instant::now() + WAIT;
    while mail.accepted.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    worker.stop();
    // The e-mail thread heard of the stop at once, not after the webhook's 4 s timeout,
    // in which it would have started three more e-mails.
    assert!(
        mail.accepted.load(Ordering::SeqCst) <= 2,
        "e-mails started after the stop: {}",
        mail.accepted.load(Ordering::SeqCst)
    );
    // The event that waited behind the hung one is free again, its attempt not counted.
    let waited: Vec<_> = events
        .iter()
        .map(|event| svc.event_deliveries(&event.order_id).expect("deliveries"))
        .filter(|deliveries| deliveries.iter().all(|d| d.attempts == 0))
        .collect();
    assert_eq!(waited.len(), 1, "{waited:?}");
    assert_eq!(rx.requests().len(), 1);
    mail.release();
    drop(dir);
}

#[test]
fn a_mail_server_that_never_answers_does_not_hold_up_webhooks() {
    let rx = Receiver::start();
    let mut mail = SilentMailServer::start();
    let Env { dir, svc, merchant, .. } = real(|c| {
        c.smtp =
            Some(SmtpConfig { url: format!("smtp://127.0.0.1:{}", mail.port), from: "Shop <pay@shop.example>".into() });
        c.webhook_timeout = Duration::from_secs(60);
    });
    let svc = Arc::new(svc);
    svc.create_order(&merchant, &order(Some("alice@customer.example"), None)).expect("order with an e-mail");
    let mut worker = svc.start_delivery_worker(Duration::from_millis(50), 100).expect("start worker");
    let deadline = std::time::Instant::now() + WAIT;
    while mail.accepted.load(std::sync::atomic::Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(mail.accepted.load(std::sync::atomic::Ordering::SeqCst) > 0, "the e-mail never reached the mail server");

    // The e-mail now waits on a server that will not answer for a minute; the webhook
    // of an order paid meanwhile goes out all the same.
    let paid = svc.create_order(&merchant, &order(None, Some(rx.url()))).expect("order with a webhook");
    svc.simulate(&paid.order.order.order_id, &SimulateAction::Pay { amount: None, confirmed: true }).expect("pay");
    worker.wake();
    let received = rx.wait_for(1, WAIT);
    assert_eq!(received.len(), 1, "the webhook waited for the mail server");
    let payload: Value = serde_json::from_slice(&received[0].body).expect("a JSON payload");
    assert_eq!(payload["type"], "order.paid");

    mail.release(); // the e-mail fails at once now, so stopping does not wait a minute
    worker.stop();
    assert!(!worker.is_running());
    assert_eq!(worker.name(), "coinorder-delivery");
    drop(dir);
}
