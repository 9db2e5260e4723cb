//! Random and mutated input never panics and always gives a typed answer: the multipart codec
//! and HMAC verification (`wire`), and the JSON arguments of the tools (through the MCP
//! handler in-process, on tools that need no kernel). `make test` runs proptest's default
//! number of cases; `make fuzz` sets `PROPTEST_CASES` to a million (the tool-argument target,
//! one in-process MCP round trip per case, then takes about 9 minutes on 2 cores).

use std::sync::Arc;

use bytes::Bytes;
use kernel_mcp::config::Limits;
use kernel_mcp::kernel::discovery::KernelSearch;
use kernel_mcp::mcp::KernelMcp;
use kernel_mcp::registry::Registry;
use kernel_mcp::wire::{DELIMITER, Message, Signer, decode, encode, websocket};
use proptest::prelude::*;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const KEY: &[u8] = b"fuzz-key";

fn valid_frames() -> Vec<Bytes> {
    let msg = Message::new(
        "execute_request",
        json!({"code": "1+1", "silent": false}),
        "fuzz",
    );
    encode(&msg, &Signer::new(KEY))
}

/// Arbitrary frames: mostly short, sometimes the delimiter, sometimes JSON-ish.
fn frame() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from),
        Just(Bytes::from_static(DELIMITER)),
        Just(Bytes::from_static(b"{}")),
        Just(Bytes::from_static(b"null")),
        "[ -~]{0,40}".prop_map(|s| Bytes::from(s.into_bytes())),
    ]
}

proptest! {
    #[test]
    fn fuzz_websocket_framings_never_panic_on_arbitrary_or_mutated_frames(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        text in ".{0,200}",
    ) {
        let _ = websocket::decode_v1(&bytes);
        let _ = websocket::decode_json_binary(&bytes);
        let _ = websocket::decode_json(&text);
        // A valid v1 frame, one byte changed or cut short: an error or a message, never a panic.
        let msg = Message::new("execute_request", json!({"code": "1+1"}), "fuzz");
        let mut frame = websocket::encode_v1("shell", &msg);
        let j = at.index(frame.len());
        frame[j] ^= byte | 1;
        let _ = websocket::decode_v1(&frame);
        frame.truncate(j);
        let _ = websocket::decode_v1(&frame);
        let json = websocket::encode_json("iopub", &msg);
        let _ = websocket::decode_json(&json[..j.min(json.len())]); // the JSON is ASCII
    }

    #[test]
    fn fuzz_websocket_v1_round_trips_any_channel_and_content(
        channel in "[a-z]{1,8}",
        code in ".{0,100}",
    ) {
        let msg = Message::new("execute_request", json!({"code": code}), "fuzz");
        let (ch, back) = websocket::decode_v1(&websocket::encode_v1(&channel, &msg)).unwrap();
        prop_assert_eq!(ch, channel);
        prop_assert_eq!(back.content, msg.content);
    }

    #[test]
    fn fuzz_decoding_arbitrary_frames_never_panics(frames in proptest::collection::vec(frame(), 0..10)) {
        let _ = decode(frames.clone(), &Signer::new(KEY));
        let _ = decode(frames, &Signer::new(b""));
    }

    #[test]
    fn fuzz_a_mutated_signed_message_is_rejected_or_decoded_never_panics(
        index in 0usize..6,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<bool>(),
    ) {
        let mut frames = valid_frames();
        let i = index.min(frames.len() - 1);
        let mut f = frames[i].to_vec();
        if f.is_empty() {
            f.push(byte);
        } else if cut {
            f.truncate(at.index(f.len())); // strictly shorter
        } else {
            let j = at.index(f.len());
            f[j] ^= byte | 1;
        }
        frames[i] = Bytes::from(f);
        // Any change to the signed parts or the signature must fail verification.
        let outcome = decode(frames, &Signer::new(KEY));
        if i >= 1 {
            prop_assert!(outcome.is_err(), "a changed frame {i} was accepted");
        }
    }

    #[test]
    fn fuzz_verifying_arbitrary_signatures_never_panics(
        sig in proptest::collection::vec(any::<u8>(), 0..80),
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 4),
    ) {
        let s = Signer::new(KEY);
        let _ = s.verify(&sig, [&parts[0], &parts[1], &parts[2], &parts[3]]);
    }
}

/// A JSON value of bounded depth and size.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(json!("../../etc/passwd")),
        Just(json!(-1)),
        Just(json!(1e300)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Arguments for `tool`: its real parameter names with random values, plus noise.
fn arguments() -> impl Strategy<Value = (String, serde_json::Map<String, Value>)> {
    let tools = prop::sample::select(vec![
        "get_session",
        "interrupt_session",
        "destroy_session",
        "get_execution",
        "send_input",
        "cancel_execution",
        "get_history",
        "delete_history",
        "complete",
        "inspect",
        "list_sessions",
        "server_info",
        "list_kernels",
        "export_history",
        "restart_session",
        "no_such_tool",
    ]);
    let keys = prop::sample::select(vec![
        "session_id",
        "run_id",
        "code",
        "cursor_pos",
        "start",
        "end",
        "stream",
        "offset",
        "limit",
        "wait_s",
        "value",
        "path",
        "format",
        "detail_level",
        "include_variables",
        "clear_history",
        "x",
    ]);
    (
        tools.prop_map(String::from),
        proptest::collection::btree_map(keys.prop_map(String::from), json_value(), 0..5)
            .prop_map(|m| m.into_iter().collect()),
    )
}

#[test]
fn fuzz_tool_arguments_always_get_a_tool_result_or_a_protocol_error() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256u32);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = runtime.block_on(async {
        let search = KernelSearch::new(&[], None, None);
        // No kernelspecs: nothing these calls do can start a kernel.
        let registry = Arc::new(Registry::new(
            search,
            None,
            Limits::default(),
            tokio::runtime::Handle::current(),
        ));
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let server = KernelMcp::new(registry);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        ().serve(client_io).await.expect("initialize")
    });
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    runner
        .run(&arguments(), |(tool, args)| {
            let params = CallToolRequestParams::new(tool.clone()).with_arguments(args.clone());
            let outcome = runtime.block_on(async {
                tokio::time::timeout(std::time::Duration::from_secs(30), client.call_tool(params))
                    .await
            });
            let Ok(outcome) = outcome else {
                return Err(TestCaseError::fail(format!("{tool}({args:?}) hung")));
            };
            if let Ok(r) = outcome {
                let code = r
                    .structured_content
                    .as_ref()
                    .and_then(|v| v["error_code"].as_str().map(String::from));
                prop_assert_ne!(
                    code.as_deref(),
                    Some("INTERNAL_ERROR"),
                    "{} {:?}",
                    tool,
                    args
                );
            }
            Ok(())
        })
        .expect("every call answered");
    runtime.block_on(async {
        let _ = client.cancel().await;
    });
}
