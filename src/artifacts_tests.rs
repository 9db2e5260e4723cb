//! The store's bounds, eviction order, digests, ids and access, on the store alone.

use super::*;

fn store(entries: usize, session_bytes: u64, artifact_bytes: u64) -> Store<String> {
    Store::new(Bounds {
        entries,
        session_bytes,
        artifact_bytes,
    })
}

fn all(_: &String) -> bool {
    true
}

async fn put(s: &Store<String>, key: &str, data: &[u8], origin: &str) -> Kept {
    s.keep(
        &key.to_string(),
        key,
        "text/plain",
        data.to_vec(),
        origin,
        Again::Same,
    )
    .await
    .expect("kept")
}

#[tokio::test]
async fn a_kept_value_reads_back_by_range_with_its_size_and_sha256() {
    let s = store(4, 1024, 1024);
    let k = put(&s, "a", b"hello artifact", "kernel").await;
    assert_eq!(k.artifact.bytes, 14);
    assert_eq!(
        k.artifact.sha256,
        hex::encode(Sha256::digest(b"hello artifact"))
    );
    assert!(k.artifact.id.starts_with("art-") && k.artifact.id.len() == 20);
    let (_, data) = s.read(&k.artifact.id, all, 6, 100).await.unwrap();
    assert_eq!(data, b"artifact");
    let (_, end) = s.read(&k.artifact.id, all, 14, 10).await.unwrap();
    assert!(end.is_empty());
    assert!(matches!(
        s.read(&k.artifact.id, all, 15, 1).await,
        Err(ArtifactError::PastEnd { .. })
    ));
}

#[tokio::test]
async fn the_oldest_go_first_when_a_session_keeps_too_many_or_too_much() {
    let s = store(3, 100, 60);
    let ids: Vec<String> = futures::future::join_all((0..3).map(|i| {
        let s = &s;
        async move { put(s, "a", &[b'x'; 10], &format!("o{i}")).await.artifact.id }
    }))
    .await;
    // Entries: the fourth evicts the first.
    let k = put(&s, "a", b"four", "o3").await;
    assert_eq!(k.evicted.len(), 1);
    assert!(ids.contains(&k.evicted[0].id));
    assert_eq!(k.notices().len(), 1);
    assert!(k.notices()[0].contains("evicted"), "{:?}", k.notices());
    // Bytes: 3 artifacts hold 24 bytes; 60 more need 100 - 24 - 60 < 0 → evict until it fits.
    let big = put(&s, "a", &[b'y'; 60], "big").await;
    let left = s.list(all);
    assert!(left.iter().map(|i| i.artifact.bytes).sum::<u64>() <= 100);
    assert!(left.iter().any(|i| i.artifact.id == big.artifact.id));
    assert!(!big.evicted.is_empty());
    // Another session is untouched by a's evictions.
    let b = put(&s, "b", b"other", "o").await;
    assert!(b.evicted.is_empty());
}

#[tokio::test]
async fn eviction_takes_the_oldest_in_the_order_they_were_kept() {
    let s = store(2, 1000, 1000);
    let first = put(&s, "a", b"1", "1").await.artifact.id;
    let second = put(&s, "a", b"2", "2").await.artifact.id;
    let third = put(&s, "a", b"3", "3").await;
    assert_eq!(third.evicted[0].id, first);
    let fourth = put(&s, "a", b"4", "4").await;
    assert_eq!(fourth.evicted[0].id, second);
    assert!(matches!(
        s.read(&first, all, 0, 1).await,
        Err(ArtifactError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_value_over_the_per_artifact_bound_is_refused_and_nothing_is_evicted() {
    let s = store(4, 1000, 10);
    let kept = put(&s, "a", b"small", "s").await;
    let e = s
        .keep(
            &"a".to_string(),
            "a",
            "text/plain",
            vec![0; 11],
            "big",
            Again::Same,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, ArtifactError::TooLarge { bytes: 11, max: 10 }),
        "{e}"
    );
    assert_eq!(s.list(all).len(), 1);
    assert_eq!(s.list(all)[0].artifact.id, kept.artifact.id);
}

#[tokio::test]
async fn the_same_origin_is_kept_once() {
    let s = store(4, 1000, 1000);
    let a = put(&s, "a", b"result", "run-1/result").await;
    let again = put(&s, "a", b"result", "run-1/result").await;
    assert!(again.existed);
    assert_eq!(a.artifact, again.artifact);
    assert_eq!(s.list(all).len(), 1);
}

#[tokio::test]
async fn keep_makes_a_new_artifact_each_time_whatever_its_origin() {
    let s = store(4, 1000, 1000);
    let key = "a".to_string();
    let one = s
        .keep(&key, "a", "text/plain", b"v".to_vec(), "kernel", Again::New)
        .await
        .unwrap();
    let two = s
        .keep(&key, "a", "text/plain", b"v".to_vec(), "kernel", Again::New)
        .await
        .unwrap();
    assert!(!two.existed);
    assert_ne!(one.artifact.id, two.artifact.id);
    assert_eq!(s.list(all).len(), 2);
    let big = s
        .keep(&key, "a", "text/plain", vec![0; 1001], "kernel", Again::New)
        .await;
    assert!(matches!(
        big,
        Err(ArtifactError::TooLarge {
            bytes: 1001,
            max: 1000
        })
    ));
}

#[tokio::test]
async fn an_artifact_is_unknown_to_whoever_does_not_see_its_session_and_after_it_ends() {
    let s = store(4, 1000, 1000);
    let a = put(&s, "a", b"secret", "kernel").await.artifact.id;
    let only_b = |k: &String| k == "b";
    assert!(matches!(
        s.read(&a, only_b, 0, 10).await,
        Err(ArtifactError::NotFound(_))
    ));
    assert!(matches!(
        s.delete(&a, only_b),
        Err(ArtifactError::NotFound(_))
    ));
    assert!(s.list(only_b).is_empty());
    assert_eq!(s.forget_session(&"a".to_string()), 1);
    assert!(matches!(s.info(&a, all), Err(ArtifactError::NotFound(_))));
}

#[tokio::test]
async fn delete_forgets_one_artifact() {
    let s = store(4, 1000, 1000);
    let a = put(&s, "a", b"1", "1").await.artifact.id;
    let b = put(&s, "a", b"2", "2").await.artifact.id;
    s.delete(&a, all).unwrap();
    let left: Vec<String> = s.list(all).into_iter().map(|i| i.artifact.id).collect();
    assert_eq!(left, vec![b]);
    assert!(matches!(s.delete(&a, all), Err(ArtifactError::NotFound(_))));
}

#[test]
fn text_types_are_text_and_the_rest_are_bytes() {
    for t in ["text/plain", "application/json", "application/vnd.x+json"] {
        assert!(is_text_mime(t), "{t}");
    }
    for t in ["application/octet-stream", "image/png"] {
        assert!(!is_text_mime(t), "{t}");
    }
}
