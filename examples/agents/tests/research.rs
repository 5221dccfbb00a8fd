//! The delegation example (issue 21 §9): the editor's two child runs of the researcher,
//! answered at once, after a human's source, or failing; cancelling the editor cancels its
//! waiting child. On the in-memory store and on SQLite.
#![allow(clippy::unwrap_used)]

use saap::backend::Backend;
use saap::{Engine, EngineOptions, MemoryBackend, SqliteBackend, UserMessageEvent};
use saap_dispatch::run::progress::Progress;
use saap_examples::research::{Brief, NeedsSource, SourceGiven, agents};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn stores() -> Vec<(Arc<dyn Backend>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteBackend::open(dir.path().join("research.db")).unwrap();
    vec![
        (Arc::new(MemoryBackend::new()), None),
        (Arc::new(sqlite), Some(dir)),
    ]
}

async fn brief(editor: &Engine, run: &str) -> String {
    tokio::time::timeout(WAIT, editor.wait_for_end(run))
        .await
        .unwrap()
        .unwrap();
    let snap = editor.snapshot(run).unwrap();
    let b = snap.events_of::<Brief>();
    assert_eq!(b.len(), 1, "{}", snap.timeline());
    b[0].text.clone()
}

/// The child run of `editor`'s run `run` that waits for a source, once there is one.
async fn waiting_child(editor: &Engine, researcher: &Engine, run: &str) -> String {
    tokio::time::timeout(WAIT, async {
        loop {
            for c in editor.children(run).unwrap() {
                if let Some(s) = researcher.snapshot(&c.run_id)
                    && !s.events_of::<NeedsSource>().is_empty()
                    && s.run.running().next().is_none()
                {
                    return c.run_id;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_writes_a_brief_from_two_child_runs() {
    for (backend, _dir) in stores() {
        let (editor, researcher) = agents(backend, EngineOptions::default()).await;
        let run = editor
            .start_run(UserMessageEvent::new("ants, bees"))
            .await
            .unwrap();
        let text = brief(&editor, &run).await;
        assert!(text.contains("honeydew"), "{text}");
        assert!(text.contains("polarized light"), "{text}");
        let children = editor.children(&run).unwrap();
        assert_eq!(children.len(), 2);
        for c in &children {
            assert_eq!(c.agent_class, "ResearcherAgent");
            assert_eq!(c.state, "ended");
            let child = researcher
                .stored_snapshot(&c.run_id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(child.run.progress(), Progress::Stopped);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_topic_waits_for_a_human_and_a_failure_is_reported() {
    for (backend, _dir) in stores() {
        let (editor, researcher) = agents(backend, EngineOptions::default()).await;
        let run = editor
            .start_run(UserMessageEvent::new("moths, !bats"))
            .await
            .unwrap();
        let child = waiting_child(&editor, &researcher, &run).await;
        // The child that failed at once reports its end on its own time: wait for it.
        tokio::time::timeout(WAIT, async {
            while !editor
                .children(&run)
                .unwrap()
                .iter()
                .any(|c| c.state == "ended")
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        let snap = editor.snapshot(&run).unwrap();
        assert_eq!(snap.run.progress().as_str(), "waiting_children");
        // The child that waits keeps its deadline (RESEARCH_TIMEOUT) pending; the one that
        // failed at once dropped its own.
        assert_eq!(snap.run.pending_timer_count(), 1, "{}", snap.timeline());
        researcher
            .send(
                &child,
                SourceGiven {
                    source: "the field guide".into(),
                },
            )
            .await
            .unwrap();
        let text = brief(&editor, &run).await;
        assert!(text.contains("moths (per the field guide)"), "{text}");
        assert!(text.contains("no answer"), "{text}");
        assert!(text.contains("unreadable"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_editor_cancels_its_waiting_child() {
    for (backend, _dir) in stores() {
        let (editor, researcher) = agents(backend, EngineOptions::default()).await;
        let run = editor
            .start_run(UserMessageEvent::new("ants, moths"))
            .await
            .unwrap();
        let child = waiting_child(&editor, &researcher, &run).await;
        editor.cancel(&run, "the issue was pulled").await.unwrap();
        tokio::time::timeout(WAIT, researcher.wait_for_end(&child))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            researcher.snapshot(&child).unwrap().run.progress(),
            Progress::Cancelled
        );
        let snap = editor.snapshot(&run).unwrap();
        assert_eq!(snap.run.progress(), Progress::Cancelled);
        assert!(snap.timeline().contains("abandoned"), "{}", snap.timeline());
    }
}

/// The human's deadline passes: the waiting child ends with a finding that says no source
/// came, and the editor's brief carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_comes_ends_the_child_at_its_deadline() {
    for (backend, _dir) in stores() {
        let wf = saap_examples::research::editor().with_delegate(
            saap_examples::research::researcher_with_deadline(Duration::from_millis(50)),
        );
        let editor = Engine::new(wf, backend, EngineOptions::default());
        let run = editor
            .start_run(UserMessageEvent::new("ants, moths"))
            .await
            .unwrap();
        let text = brief(&editor, &run).await;
        assert!(text.contains("honeydew"), "{text}");
        assert!(text.contains("moths: no source came in time"), "{text}");
    }
}
