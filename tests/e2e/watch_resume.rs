//! Watches as client-go expects them: a watch of one quiet tenant resumes
//! however far other tenants' churn moved the compacted event log (20,000
//! changes, made by a few hundred requests that each change many node
//! groups, to stay fast), and a watch that asks for bookmarks learns the
//! store's revision while only other tenants change.

use std::time::Duration;

use cms_e2e::fixtures::{TENANTS, tenant, tenant_path, worker_group};
use cms_e2e::{Api, Frame, Server, Watch};
use serde_json::{Value, json};

/// How long any one expected frame may take to arrive.
const FRAME_WAIT: Duration = Duration::from_secs(10);

/// The watch of the quiet tenant by field selector.
const QUIET_SELECTOR: &str = "&fieldSelector=metadata.name%3Dquiet";

/// The same, at the tenant's own path.
const QUIET_PATH: &str = "/api/v1/tenants/quiet?watch=true";

/// Node groups one churning PUT adds (and the next removes).
const GROUPS: usize = 24;

/// Makes at least `changes` changes in `tenants`, one writer per tenant at
/// once. Each PUT of a tenant alternately adds [`GROUPS`] inline node groups
/// and removes them: one request, `GROUPS + 1` changes (the groups and the
/// tenant), each at its own store revision.
async fn churn(api: &Api, tenants: &[Value], changes: usize) {
    let requests = changes.div_ceil(GROUPS + 1).div_ceil(tenants.len());
    let groups: Vec<Value> =
        (0..GROUPS).map(|index| worker_group(&format!("g{index:02}"), 1, index as u8)).collect();
    let writers = tenants.iter().cloned().map(|mut current| {
        let api = api.clone();
        let groups = groups.clone();
        tokio::spawn(async move {
            let path = tenant_path(current["metadata"]["name"].as_str().expect("a name"));
            for request in 0..requests {
                current["spec"]["nodeGroups"] = match request % 2 {
                    0 => Value::Array(groups.clone()),
                    _ => json!([]),
                };
                current = api.put(&path, &current).await.expect(200);
            }
        })
    });
    for writer in writers.collect::<Vec<_>>() {
        writer.await.expect("a writer");
    }
}

/// The store's revision now: the `id` that ends a fresh watch's burst.
async fn revision(api: &Api) -> u64 {
    let mut probe = Watch::open(api, "", &[]).await;
    probe.initial_burst(FRAME_WAIT).await.1
}

/// Changes `current` (a tenant as the API returned it) and returns it as
/// stored.
async fn touch(api: &Api, current: &Value, label: &str) -> Value {
    let mut next = current.clone();
    next["metadata"]["labels"] = json!({"touch": label});
    let name = current["metadata"]["name"].as_str().expect("a name");
    api.put(&tenant_path(name), &next).await.expect(200)
}

/// Reads the next event and checks that it is `MODIFIED` of `expected`, at
/// its resource version, with an id after `after`; returns the id.
async fn expect_modified(watch: &mut Watch, expected: &Value, after: u64) -> u64 {
    let frame = watch.next_event(FRAME_WAIT).await;
    assert_eq!(frame.event_type(), Some("MODIFIED"), "{frame:?}");
    assert_eq!(frame.name(), expected["metadata"]["name"].as_str(), "{frame:?}");
    assert_eq!(frame.object()["metadata"]["resourceVersion"], expected["metadata"]["resourceVersion"]);
    let id = frame.id.expect("a live frame carries an id");
    assert!(id > after, "id {id} follows {after}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quiet_tenants_watch_resumes_past_others_churn() {
    const CHANGES: usize = 20_000;
    let server = Server::options()
        .env("CMS_EVENT_RETENTION", "500")
        .env("CMS_REQUEST_RATE_PER_IDENTITY", "0")
        .start()
        .await;
    let api = server.api();
    let quiet = api.post(TENANTS, &tenant("quiet")).await.expect(201);
    let mut busy = Vec::new();
    for index in 0..4 {
        busy.push(api.post(TENANTS, &tenant(&format!("busy-{index:02}"))).await.expect(201));
    }

    // Both forms of the watch open with the quiet tenant alone.
    let mut by_selector = Watch::open(&api, QUIET_SELECTOR, &[]).await;
    let (burst, selector_id) = by_selector.initial_burst(FRAME_WAIT).await;
    assert_eq!(burst, ["quiet"]);
    let mut by_path = Watch::open_at(&api, QUIET_PATH, &[]).await;
    let (burst, path_id) = by_path.initial_burst(FRAME_WAIT).await;
    assert_eq!(burst, ["quiet"]);
    drop((by_selector, by_path));

    churn(&api, &busy, CHANGES).await;
    let churned = revision(&api).await;
    assert!(
        churned >= selector_id + CHANGES as u64,
        "{CHANGES} changes of others: {selector_id} to {churned}"
    );

    // The log no longer reaches back: a watch of every tenant cannot resume.
    let gone = api.get(&format!("{TENANTS}?watch=true&resourceVersion={selector_id}")).await;
    gone.expect_error(410, "Gone");
    // The quiet tenant's watches resume, with nothing to replay.
    let resume = format!("{QUIET_SELECTOR}&resourceVersion={selector_id}");
    let mut by_selector = Watch::open(&api, &resume, &[]).await;
    let mut by_path = Watch::open_at(&api, QUIET_PATH, &[("last-event-id", &path_id.to_string())]).await;

    // A change of the quiet tenant arrives, once, and others' do not.
    let first = touch(&api, &quiet, "first").await;
    let selector_seen = expect_modified(&mut by_selector, &first, selector_id).await;
    let path_seen = expect_modified(&mut by_path, &first, path_id).await;
    let beside = api.get(&tenant_path("busy-00")).await.expect(200);
    touch(&api, &beside, "beside").await;
    let second = touch(&api, &first, "second").await;
    expect_modified(&mut by_selector, &second, selector_seen).await;
    expect_modified(&mut by_path, &second, path_seen).await;

    // A resume from before those changes replays them, although the log
    // was compacted past that point: they are the tenant's own.
    let mut replayed = Watch::open(&api, &resume, &[]).await;
    let seen = expect_modified(&mut replayed, &first, selector_id).await;
    expect_modified(&mut replayed, &second, seen).await;
}

/// Reads frames until a `BOOKMARK` past `after`, failing on any event.
async fn next_bookmark(watch: &mut Watch, after: u64) -> u64 {
    loop {
        let frame: Frame = watch.next_event(FRAME_WAIT).await;
        let revision = frame.bookmark().unwrap_or_else(|| panic!("only bookmarks are expected: {frame:?}"));
        if revision > after {
            return revision;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_follow_the_store_while_only_others_change() {
    let server = Server::options().env("CMS_WATCH_BOOKMARK_INTERVAL", "1s").start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("quiet")).await.expect(201);
    let mut busy = api.post(TENANTS, &tenant("busy")).await.expect(201);

    let mut plain = Watch::open(&api, QUIET_SELECTOR, &[]).await;
    let (_, plain_id) = plain.initial_burst(FRAME_WAIT).await;
    let mut watch = Watch::open(&api, &format!("{QUIET_SELECTOR}&allowWatchBookmarks=true"), &[]).await;
    let (burst, synced) = watch.initial_burst(FRAME_WAIT).await;
    assert_eq!(burst, ["quiet"]);

    let mut reached = synced;
    for round in 0..3 {
        busy = touch(&api, &busy, &round.to_string()).await;
        reached = next_bookmark(&mut watch, reached).await;
    }
    assert!(reached >= synced + 3, "three writes of busy were passed: {synced} to {reached}");

    // The last bookmark's revision is a true resume point: a watch of every
    // tenant resumed from it replays nothing before the next change.
    let mut resumed = Watch::open(&api, &format!("&resourceVersion={reached}"), &[]).await;
    let next = touch(&api, &busy, "next").await;
    expect_modified(&mut resumed, &next, reached).await;

    // Without the parameter there are no bookmarks: the first frame of the
    // plain watch after all this is the quiet tenant's next change.
    let quiet = api.get(&tenant_path("quiet")).await.expect(200);
    let quiet = touch(&api, &quiet, "last").await;
    expect_modified(&mut plain, &quiet, plain_id).await;

    // A label selector: a tenant that starts matching is ADDED, one that
    // stops is DELETED, with its new state.
    let mut red = Watch::open(&api, "&labelSelector=team%3Dred&allowWatchBookmarks=true", &[]).await;
    let (burst, _) = red.initial_burst(FRAME_WAIT).await;
    assert!(burst.is_empty(), "no tenant is red yet: {burst:?}");
    let mut current = next;
    for (team, expected) in [("red", "ADDED"), ("red", "MODIFIED"), ("blue", "DELETED")] {
        current["metadata"]["labels"] = json!({"team": team, "step": expected});
        current = api.put(&tenant_path("busy"), &current).await.expect(200);
        let frame = loop {
            let frame = red.next_event(FRAME_WAIT).await;
            if frame.bookmark().is_none() {
                break frame;
            }
        };
        assert_eq!((frame.event_type(), frame.name()), (Some(expected), Some("busy")), "{frame:?}");
        assert_eq!(frame.object()["metadata"]["labels"]["team"], team);
    }

    for (query, named) in [
        ("&allowWatchBookmarks=maybe", "allowWatchBookmarks"),
        ("&fieldSelector=spec.kubernetesVersion%3D1.31.1", "fieldSelector"),
        ("&fieldSelector=metadata.name!%3Dquiet", "fieldSelector"),
    ] {
        let reply = api.get(&format!("{TENANTS}?watch=true{query}")).await;
        let message = reply.expect_error(400, "BadRequest");
        assert!(message.contains(named), "{query}: {message}");
    }
}
