//! EndToEndLatency's positional arguments and the 4.2 flag form.

use strom_tools::e2e_latency::args::{parse, Outcome, USAGE};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn positional_form() {
    let a = parse(&args("h:9092 topic 1000 all 100")).unwrap();
    assert_eq!(a.bootstrap.as_deref(), Some("h:9092"));
    assert_eq!(a.topic, "topic");
    assert_eq!(a.num_messages, 1000);
    assert_eq!(a.acks, "all");
    assert_eq!(a.message_size, 100);
}

#[test]
fn flag_form_may_omit_the_bootstrap_server() {
    let a = parse(&args("--topic t --num-records 5 --producer-acks 1 --record-size 10 --record-key-size 4 --num-headers 2")).unwrap();
    assert_eq!(a.bootstrap, None);
    assert_eq!(a.key_size, 4);
    assert_eq!(a.num_headers, 2);
}

#[test]
fn kafkas_messages() {
    assert_eq!(
        parse(&args("h:9092 topic 1000")).unwrap_err(),
        Outcome::Error(USAGE.to_string())
    );
    assert_eq!(
        parse(&args("h:9092 topic 1000 0 100")).unwrap_err(),
        Outcome::Error(
            "Latency testing requires synchronous acknowledgement. Please use 1 or all".to_string()
        )
    );
}
