//! Sessions that expire when left idle, renew_session, clear_queue, and the fields a person
//! needs to look at the agent's kernel (`connection_file`, `attached`), on a standalone
//! server (where nothing expires unless asked) and in the shared service (a day by default).

use std::time::Duration;

use crate::common::service::TestService;
use crate::common::*;
use serde_json::json;

fn rfc(v: &serde_json::Value) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}")))
        .expect("RFC 3339")
}

#[tokio::test]
async fn an_idle_session_expires_and_then_answers_session_expired_while_its_history_stays_readable()
{
    let server = Server::start().await;
    let info = structured(
        &server
            .call(
                "create_session",
                json!({"session_id": "brief", "expires_after_s": 2}),
            )
            .await,
    );
    assert!(info["expires_at"].is_string(), "{info}");
    let kernel = info["pid"].as_u64().expect("pid") as u32;
    let r = server.exec("brief", "v = 7; v").await;
    assert_eq!(r["result"], "7");
    assert!(
        wait_until(Duration::from_secs(20), || !pid_alive(kernel)).await,
        "the expired session's kernel is still running"
    );
    let r = server
        .call("execute", json!({"session_id": "brief", "code": "v"}))
        .await;
    assert_eq!(
        structured(&r)["error_code"],
        "SESSION_EXPIRED",
        "{}",
        text(&r)
    );
    assert!(
        text(&r).contains("get_history"),
        "says what to do next: {}",
        text(&r)
    );
    let r = server
        .call("get_session", json!({"session_id": "brief"}))
        .await;
    assert_eq!(structured(&r)["error_code"], "SESSION_EXPIRED");
    let h = structured(
        &server
            .call("get_history", json!({"session_id": "brief"}))
            .await,
    );
    assert_eq!(h["entries"][0]["code"], "v = 7; v", "{h}");
    // The name is free again.
    server.create_session("brief").await;
    server.shutdown().await;
}

#[tokio::test]
async fn renew_session_moves_expires_at_later_and_zero_means_never() {
    let server = Server::start().await;
    let info = structured(
        &server
            .call(
                "create_session",
                json!({"session_id": "r", "expires_after_s": 60}),
            )
            .await,
    );
    let first = rfc(&info["expires_at"]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let renewed = structured(
        &server
            .call("renew_session", json!({"session_id": "r"}))
            .await,
    );
    assert!(rfc(&renewed["expires_at"]) > first, "{info} then {renewed}");
    let longer = structured(
        &server
            .call(
                "renew_session",
                json!({"session_id": "r", "expires_after_s": 3600}),
            )
            .await,
    );
    assert!(
        rfc(&longer["expires_at"]) > rfc(&renewed["expires_at"]) + chrono::Duration::seconds(3000)
    );
    let never = structured(
        &server
            .call(
                "renew_session",
                json!({"session_id": "r", "expires_after_s": 0}),
            )
            .await,
    );
    assert!(never["expires_at"].is_null(), "{never}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_standalone_session_never_expires_by_default_and_a_service_session_expires_in_a_day() {
    let server = Server::start().await;
    let info = server.create_session("s").await;
    assert!(info["expires_at"].is_null(), "{info}");
    assert_eq!(info["attached"], false);
    let file = info["connection_file"].as_str().expect("connection_file");
    assert!(std::path::Path::new(file).exists(), "{file}");
    server.shutdown().await;

    let svc = TestService::new();
    let relay = svc.relay().await;
    let info = relay.create_session("s").await;
    let at = rfc(&info["expires_at"]);
    let day = at - rfc(&info["created_at"]);
    assert!((day.num_seconds() - 86_400).abs() < 60, "{info}");
    relay.destroy("s").await;
    relay.shutdown().await;
}

#[tokio::test]
async fn clear_queue_cancels_the_waiting_runs_and_the_running_one_goes_on() {
    let server = Server::start().await;
    server.create_session("q").await;
    let running = structured(
        &server
            .call("execute", json!({"session_id": "q", "code": "import time; time.sleep(3); 'done'", "wait_s": 0}))
            .await,
    );
    let mut queued = Vec::new();
    for i in 0..3 {
        let r = structured(
            &server
                .call(
                    "execute",
                    json!({"session_id": "q", "code": format!("{i}"), "wait_s": 0}),
                )
                .await,
        );
        assert_eq!(r["status"], "queued", "{r}");
        queued.push(r["run_id"].clone());
    }
    let r = structured(&server.call("clear_queue", json!({"session_id": "q"})).await);
    assert_eq!(r["cancelled"], json!(queued), "{r}");
    let q = structured(
        &server
            .call("get_execution", json!({"run_id": queued[0], "wait_s": 0}))
            .await,
    );
    assert_eq!(q["status"], "cancelled");
    let done = structured(
        &server
            .call(
                "get_execution",
                json!({"run_id": running["run_id"], "wait_s": 30}),
            )
            .await,
    );
    assert_eq!(done["result"], "'done'", "{done}");
    server.shutdown().await;
}
