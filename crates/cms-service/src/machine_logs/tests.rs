use futures_util::StreamExt;

use super::*;

fn query(service: Option<&str>, follow: Option<&str>, tail: Option<&str>) -> LogQuery {
    LogQuery {
        service: service.map(str::to_string),
        follow: follow.map(str::to_string),
        tail: tail.map(str::to_string),
    }
}

#[test]
fn service_ids_are_talos_ids() {
    for good in ["machined", "etcd", "kubelet", "cri", "ext-tailscale", "a", "0.x_y-z", &"a".repeat(63)] {
        assert!(is_service_id(good), "{good}");
    }
    for bad in ["", "Machined", "-etcd", ".x", "a/b", "a b", "../etc", "é", "x\n", &"a".repeat(64)] {
        assert!(!is_service_id(bad), "{bad:?}");
    }
}

#[test]
fn follow_and_tail_are_checked_and_bounded() {
    let parsed = |follow, tail| query(Some("etcd"), follow, tail).parse();
    assert_eq!(parsed(None, None).unwrap(), Parsed { follow: false, tail: DEFAULT_TAIL });
    assert_eq!(parsed(Some("true"), Some("1")).unwrap(), Parsed { follow: true, tail: 1 });
    assert_eq!(parsed(Some("false"), Some("10000")).unwrap(), Parsed { follow: false, tail: MAX_TAIL });
    for (follow, tail) in [(Some("yes"), None), (None, Some("0")), (None, Some("10001")), (None, Some("-1"))]
    {
        let err = parsed(follow, tail).unwrap_err();
        assert!(matches!(err, ApiError::BadRequest(_)), "{err:?}");
    }
    assert!(query(None, None, None).service().is_err());
    let long = "x".repeat(500);
    let ApiError::BadRequest(message) = query(Some(&long), None, None).service().unwrap_err() else {
        panic!("a bad request")
    };
    assert!(message.len() < 300, "hostile values are clipped: {message}");
}

async fn text(chunks: LogChunks) -> String {
    let parts: Vec<Vec<u8>> = chunks.map(Result::unwrap).collect().await;
    String::from_utf8(parts.concat()).unwrap()
}

fn chunks(parts: &[&str]) -> LogChunks {
    let parts: Vec<_> = parts.iter().map(|part| Ok(part.as_bytes().to_vec())).collect();
    Box::pin(futures_util::stream::iter(parts))
}

#[tokio::test]
async fn skipping_lines_crosses_chunks() {
    let parts = ["a\nb", "\nc\n", "d\ne\n"];
    assert_eq!(count_lines(chunks(&parts)).await.unwrap(), 5);
    assert_eq!(text(skip_lines(chunks(&parts), 0)).await, "a\nb\nc\nd\ne\n");
    assert_eq!(text(skip_lines(chunks(&parts), 1)).await, "b\nc\nd\ne\n");
    assert_eq!(text(skip_lines(chunks(&parts), 2)).await, "c\nd\ne\n");
    assert_eq!(text(skip_lines(chunks(&parts), 3)).await, "d\ne\n");
    assert_eq!(text(skip_lines(chunks(&parts), 5)).await, "");
    assert_eq!(text(skip_lines(chunks(&parts), 9)).await, "");
}
