//! The engine's unit tests: what its parts do that the integration tests cannot see.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::ids::*;
use super::options::*;
use super::payloads::*;
use super::run_table::*;
use super::slot::*;
use super::*;
use crate::backend::{Backend, Pending, PersistBatch, StoreError, StoredRun};
use crate::context::{ContextError, NewCtx, StepCtx};
use crate::event::Payload;
use crate::params::{BoundEvent, EventName};
use crate::snapshot::RunSnapshot;
use crate::workflow::{StepFuture, Workflow};
use saap_dispatch::derived_event_id;
use saap_dispatch::ids::run_key;
use saap_dispatch::{EventId, EventKind, ExecutionId, NewEventType, Outcome, Run};
use std::sync::{Arc, Mutex};
use std::task::Poll;

/// A fan-out's payloads take the room the core reserved in the log for the fan-out and
/// the events its workers return: the workers' payloads are added without the table
/// growing (and copying every payload) on the way.
#[test]
fn a_fan_outs_payloads_take_the_room_the_core_reserved_for_its_workers() {
    use saap_dispatch::{DeclaredConditions, NewEvent, SpecSyntax, compile_spec_text};
    let spec = compile_spec_text(
        "name: W\nevents: [{name: A}, {name: R}]\nsteps:\n  - {name: fan, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: work, params: [{name: a, kind: required, types: [A]}], outputs: [R]}\n  - {name: join, params: [{name: xs, kind: fixed_list, size: 500, types: [R]}]}\n",
        SpecSyntax::Yaml,
    )
    .unwrap();
    let (start, a, r) = (
        spec.type_id("StartEvent").unwrap(),
        spec.type_id("A").unwrap(),
        spec.type_id("R").unwrap(),
    );
    let mut run = Run::new(Arc::new(spec), 9);
    let mut payloads = Vec::new();
    let null = || Payload::from_json(serde_json::Value::Null);
    let mut offer = |run: &mut Run, x: Option<ExecutionId>, news: Vec<NewEvent>| {
        let mut pending: Vec<_> = news.iter().map(|e| (e.id, null())).collect();
        match x {
            None => {
                for e in news {
                    run.append(e, &mut DeclaredConditions).unwrap();
                }
            }
            Some(x) => run
                .complete(x, 1, Outcome::Returned(news), &mut DeclaredConditions)
                .unwrap(),
        }
        add_payloads(run, &mut payloads, true, &mut pending);
        assert_eq!(payloads.len(), run.log().len());
        payloads.as_ptr()
    };
    offer(
        &mut run,
        None,
        vec![NewEvent::known(EventId::from_bytes([1; 12]), start)],
    );
    let fan = run.next_started().unwrap();
    let items = (0..500)
        .map(|i| NewEvent::known(derived_event_id(9, fan, i), a))
        .collect();
    let sized = offer(&mut run, Some(fan), items);
    for w in run.drain_started().collect::<Vec<_>>() {
        let out = vec![NewEvent::known(derived_event_id(9, w, 0), r)];
        assert_eq!(offer(&mut run, Some(w), out), sized, "the payloads grew");
    }
    assert_eq!(run.log().len(), 1 + 2 * 500);
}

/// A step's context drops only what it owns, out of line (`StepCtx`'s `Drop`): the
/// run's slot it looked up and a thread id too long to hold inline are given back, so
/// a context that skips its drop glue leaks nothing.
#[tokio::test(flavor = "current_thread")]
async fn a_context_holds_no_slot_and_a_dropped_one_gives_back_its_long_thread_id() {
    use crate::event::UserMessageEvent;
    let engine = Engine::in_memory(slow_or_fast());
    let long = "t".repeat(40);
    let run = engine
        .start_run_in(Some(&long), UserMessageEvent::new("slow"))
        .await
        .unwrap();
    let slot = engine.shared.slot(&run).unwrap();
    let thread = slot.names.given_thread().unwrap().clone();
    let (slots, threads) = (Arc::strong_count(&slot), Arc::strong_count(&thread));
    for look_up in [false, true] {
        let ctx = StepCtx::local(engine.shared.ctx_ref, &slot.names, ExecutionId(0), 0);
        assert_eq!(
            (ctx.run_id(), ctx.thread_id()),
            (run.as_str(), long.as_str())
        );
        assert_eq!(
            Arc::strong_count(&thread),
            threads + 1,
            "the long id is shared"
        );
        if look_up {
            // Reading the start event's fields has the engine find the run by its id: the
            // context keeps no reference to the engine's slot.
            assert!(!ctx.start_fields().is_null());
            assert_eq!(Arc::strong_count(&slot), slots, "no slot is kept");
        }
        drop(ctx);
        assert_eq!(Arc::strong_count(&slot), slots, "no slot was held");
        assert_eq!(Arc::strong_count(&thread), threads, "the id was given back");
    }
    // A context of the same run with ids held inline owns nothing: it drops in place.
    let short = engine
        .start_run_in(Some("short"), UserMessageEvent::new("slow"))
        .await
        .unwrap();
    let short_slot = engine.shared.slot(&short).unwrap();
    let n = Arc::strong_count(&short_slot);
    let ctx = StepCtx::local(engine.shared.ctx_ref, &short_slot.names, ExecutionId(0), 0);
    assert_eq!(ctx.thread_id(), "short");
    drop(ctx);
    assert_eq!(Arc::strong_count(&short_slot), n);
}

#[tokio::test(flavor = "current_thread")]
async fn an_ended_body_run_is_kept_by_its_thread_and_its_step_starts_in_it_again() {
    use crate::event::{StopEvent, UserMessageEvent};
    use crate::workflow::{StepRun, body_run, kept_bodies, recycle_body};
    let engine = Engine::in_memory(slow_or_fast());
    // A run whose body waits: its slot gives the bodies below a context.
    let run = engine
        .start_run(UserMessageEvent::new("slow"))
        .await
        .unwrap();
    let slot = engine.shared.slot(&run).unwrap();
    let ctx = || {
        NewCtx::Made(Box::new(StepCtx::local(
            engine.shared.ctx_ref,
            &slot.names,
            ExecutionId(0),
            0,
        )))
    };
    let bound = |m: &str| {
        vec![vec![BoundEvent {
            id: EventId::from_bytes([7; 12]),
            name: crate::params::EventName::Static("UserMessageEvent"),
            payload: Payload::typed(UserMessageEvent::new(m)),
        }]]
    };
    let step = &engine.shared.workflow.inner.steps[0];
    let address = |f: &StepFuture| &**f as *const dyn StepRun as *const u8;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let kept_before = kept_bodies();

    let mut first = body_run(step);
    let at = address(&first);
    let Ok(Poll::Ready(Ok(out))) = first.as_mut().start(
        &step.body_fn,
        &bound("fast"),
        ctx(),
        Vec::new(),
        Some(&mut cx),
    ) else {
        panic!("a ready body ends at its first poll");
    };
    assert!(out[0].payload.get::<StopEvent>().is_some());
    recycle_body(step.key, first);
    assert_eq!(kept_bodies(), kept_before + 1, "the ended run is kept");

    let mut again = body_run(step);
    assert_eq!(address(&again), at, "the allocation is reused");
    assert_eq!(kept_bodies(), kept_before);
    let Ok(Poll::Pending) =
        again
            .as_mut()
            .start(&step.body_fn, &bound("fast"), ctx(), Vec::new(), None)
    else {
        panic!("a body started without a context is not polled yet");
    };
    let Poll::Ready(Ok(out)) = again.as_mut().poll(&mut cx) else {
        panic!("the restarted body runs its new future");
    };
    assert_eq!(out.len(), 1);
    assert!(
        matches!(again.as_mut().poll(&mut cx), Poll::Ready(Err(_))),
        "an ended run polled again is an error, not a panic"
    );
    assert!(
        again
            .as_mut()
            .start(&step.body_fn, &[], ctx(), Vec::new(), None)
            .is_err(),
        "inputs that do not fit the step are an error, not a panic"
    );
    let mut waits = body_run(step);
    assert_ne!(address(&waits), at, "a body in use is not handed out twice");
    assert!(matches!(
        waits.as_mut().start(
            &step.body_fn,
            &bound("slow"),
            ctx(),
            Vec::new(),
            Some(&mut cx)
        ),
        Ok(Poll::Pending)
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn a_new_runs_thread_id_is_a_fresh_object_id_made_once_and_a_given_one_is_kept() {
    use crate::event::UserMessageEvent;
    let engine = Engine::in_memory(slow_or_fast());
    let a = engine
        .start_run(UserMessageEvent::new("fast"))
        .await
        .unwrap();
    let b = engine
        .start_run(UserMessageEvent::new("fast"))
        .await
        .unwrap();
    let ta = engine.snapshot(&a).unwrap().thread_id;
    let tb = engine.snapshot(&b).unwrap().thread_id;
    assert!(
        ta.len() == 24 && ta.bytes().all(|c| c.is_ascii_hexdigit()),
        "{ta}"
    );
    assert!(ta != a && ta != b && ta != tb, "every id is its own");
    assert_eq!(engine.snapshot(&a).unwrap().thread_id, ta, "made once");
    let c = engine
        .start_run_in(Some(&ta), UserMessageEvent::new("fast"))
        .await
        .unwrap();
    assert_eq!(engine.snapshot(&c).unwrap().thread_id, ta);
}

#[test]
fn a_new_runs_ids_are_unique_and_well_formed() {
    let g = IdGen::new();
    let mut ids = std::collections::HashSet::new();
    for _ in 0..5_000 {
        let r = g.next_run();
        ids.insert(r.run.to_string());
        ids.insert(r.thread.to_string());
        ids.insert(r.start.to_string());
        ids.insert(g.next().to_string());
    }
    assert_eq!(ids.len(), 20_000);
    assert!(
        ids.iter()
            .all(|i| i.len() == 24 && i.bytes().all(|b| b.is_ascii_hexdigit()))
    );
}

#[test]
fn a_run_ids_text_and_key_are_its_hex_and_run_key_whatever_id_came_before() {
    // Ids of two processes and two seconds, interleaved: the thread's cached head is
    // replaced each time it differs.
    let ids = [
        EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 7),
        EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 8),
        EventId::object_id(0x6553_f101, [1, 2, 3, 4, 5], 9),
        EventId::object_id(0x6553_f101, [9, 2, 3, 4, 5], 9),
        EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 0xff_ffff),
    ];
    for id in ids.iter().chain(ids.iter().rev()) {
        let (text, key) = run_id_text(id);
        let text = std::str::from_utf8(&text).expect("hex is ASCII");
        assert_eq!(text, id.to_string());
        assert_eq!(text, &*hex_id(id));
        assert_eq!(key, run_key(text));
    }
}

#[test]
fn the_run_table_hash_spreads_engine_made_ids_over_its_low_bits() {
    // Engine-made run ids differ in their last characters only; the table picks a
    // bucket by the hash's low bits and a group by its top 7.
    use std::hash::BuildHasher;
    let g = IdGen::new();
    let n = 1 << 16;
    let (mut low, mut top) = (vec![0u32; 1024], vec![0u32; 128]);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..n {
        let id = hex_id(&g.next());
        let h = RunIdBuild::default().hash_one(&*id);
        seen.insert(h);
        low[(h & 1023) as usize] += 1;
        top[(h >> 57) as usize] += 1;
    }
    assert_eq!(seen.len(), n, "no two ids hash alike");
    // 64 per bucket on average; a uniform spread stays well within 2x.
    assert!(low.iter().all(|&c| (32..=128).contains(&c)), "{low:?}");
    assert!(top.iter().all(|&c| (256..=768).contains(&c)), "{top:?}");
}

#[test]
fn ids_are_unique_and_well_formed() {
    let g = IdGen::new();
    let ids: std::collections::HashSet<String> =
        (0..10_000).map(|_| g.next().to_string()).collect();
    assert_eq!(ids.len(), 10_000);
    assert!(
        ids.iter()
            .all(|i| i.len() == 24 && i.bytes().all(|b| b.is_ascii_hexdigit()))
    );
}

#[test]
fn kind_bits_round_trip() {
    for bits in 0..32u8 {
        assert_eq!(EventKind::from_bits(bits).bits(), bits);
    }
}

/// A chain that waits for an outside answer, showing a display event on the way.
fn asking() -> Workflow {
    use crate::event::{
        ChunkEvent, HumanInTheLoopRequestEvent, HumanInTheLoopResponseEvent, StopEvent,
        UserMessageEvent,
    };
    use crate::params::Required;
    use crate::workflow::{Step, StepError};
    Workflow::builder("Asking")
        .step(Step::new(
            "ask",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                ctx.display(&ChunkEvent::default())
                    .await
                    .map_err(|e| StepError::new(e.to_string()))?;
                Ok::<_, StepError>(HumanInTheLoopRequestEvent::default())
            },
        ))
        .step(Step::new(
            "answer",
            |_: Required<HumanInTheLoopResponseEvent>, _: StepCtx| async {
                Ok::<_, StepError>(StopEvent::default())
            },
        ))
        .build()
        .expect("valid workflow")
}

#[test]
fn the_names_of_rust_event_types_are_bound_without_a_reference_count() {
    let engine = Engine::in_memory(asking());
    let names = &engine.shared.type_names;
    let spec = engine.shared.workflow.compiled();
    let name_of = |n: &str| {
        spec.types
            .iter()
            .position(|t| t.name == n)
            .map(|i| names[i].clone())
            .expect("a declared type")
    };
    for rust_type in [
        "UserMessageEvent",
        "HumanInTheLoopRequestEvent",
        "StopEvent",
    ] {
        let name = name_of(rust_type);
        assert!(
            matches!(name, EventName::Static(_)),
            "{rust_type}: {name:?}"
        );
        assert_eq!(name, rust_type);
    }
    // Every type has its own name, in the spec's order.
    for (t, name) in spec.types.iter().zip(names.iter()) {
        assert_eq!(*name, *t.name);
    }
}

#[tokio::test]
async fn a_step_context_kept_beyond_its_engine_says_the_engine_is_gone() {
    use crate::event::{StopEvent, UserMessageEvent};
    use crate::params::Required;
    use crate::workflow::{Step, StepError};
    let kept: Arc<Mutex<Option<StepCtx>>> = Arc::default();
    let keep = kept.clone();
    let wf = Workflow::builder("Keeper")
        .step(Step::new(
            "keep",
            move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                let keep = keep.clone();
                async move {
                    ctx.run_context()
                        .set("seen", &1u32)
                        .await
                        .map_err(|e| StepError::new(e.to_string()))?;
                    *keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx);
                    Ok::<_, StepError>(StopEvent::default())
                }
            },
        ))
        .build()
        .expect("valid workflow");
    let engine = Engine::in_memory(wf);
    engine.run(UserMessageEvent::new("go")).await.expect("run");
    let ctx = kept
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .expect("kept");
    // While the engine exists, the kept context still reaches it.
    assert!(ctx.thread_context().get::<u32>("x").await.is_ok());
    drop(engine);
    assert_eq!(
        ctx.run_context().get::<u32>("seen").await,
        Err(ContextError::EngineGone),
        "a context does not keep its engine alive"
    );
    assert_eq!(
        ctx.display(&crate::event::ChunkEvent::default()).await,
        Err(ContextError::EngineGone)
    );
}

/// A task waiting for the run's end.
fn spawn_waiter(engine: &Engine, id: &str) -> tokio::task::JoinHandle<Result<(), EngineError>> {
    let (engine, id) = (engine.clone(), id.to_string());
    tokio::spawn(async move { engine.wait_for_end(&id).await })
}

/// Answers the run's question, then expects `waiter` to be woken (`why` if not).
async fn answer_and_expect_woken(
    engine: &Engine,
    id: &str,
    waiter: tokio::task::JoinHandle<Result<(), EngineError>>,
    why: &str,
) {
    engine
        .send(id, crate::event::HumanInTheLoopResponseEvent::default())
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
        .await
        .expect(why)
        .unwrap()
        .unwrap();
}

/// Answers every run of `asking()` in `ids` while a task per run waits for its end (so
/// that the runs are evicted while something still holds them), and waits for those
/// tasks.
async fn answer_all_while_waited_for(engine: &Engine, ids: &[String]) {
    use crate::event::HumanInTheLoopResponseEvent;
    let waiters: Vec<_> = ids.iter().map(|id| spawn_waiter(engine, id)).collect();
    tokio::task::yield_now().await;
    for id in ids {
        engine
            .send(id, HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
    }
    for w in waiters {
        w.await.unwrap().unwrap();
    }
}

/// Waits until the run logged `n` events (start, display, request: it waits).
async fn logged(engine: &Engine, run: &str, n: usize) -> RunSnapshot {
    let mut rx = engine.watch(run).expect("live run");
    loop {
        let snap = engine.snapshot(run).expect("live run");
        if snap.run.log().len() >= n {
            return snap;
        }
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.changed())
            .await
            .expect("the run makes progress")
            .expect("the run is live");
    }
}

/// An in-memory engine of `asking` that keeps no ended runs.
fn forgetful_engine() -> Engine {
    Engine::new(
        asking(),
        Arc::new(crate::backend::memory::MemoryBackend::new()),
        EngineOptions {
            keep_ended_runs: false,
            ..EngineOptions::default()
        },
    )
}

#[derive(Debug, Clone, saap::Event, serde::Serialize, serde::Deserialize)]
struct FanItem {
    v: u32,
}
#[derive(Debug, Clone, saap::Event, serde::Serialize, serde::Deserialize)]
struct FanResult {
    v: u32,
}

/// An engine keeping no ended runs, of a fan-out of 300 items to workers and a fixed-list
/// fan-in: 603 events a run, more than a kept slot may hold (`SPARE_SLOT_MAX_EVENTS`).
fn large_fan_out_engine() -> Engine {
    large_fan_out_engine_with(EngineOptions {
        keep_ended_runs: false,
        ..EngineOptions::default()
    })
}

fn large_fan_out_engine_with(opts: EngineOptions) -> Engine {
    use crate::event::{StopEvent, UserMessageEvent};
    use crate::params::{FixedList, Required};
    use crate::workflow::{Step, StepError};
    let workflow =
        Workflow::builder("Fan")
            .step(Step::new(
                "fan",
                |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>((0..300).map(|v| FanItem { v }).collect::<Vec<_>>())
                },
            ))
            .step(Step::new(
                "work",
                |i: Required<FanItem>, _: StepCtx| async move {
                    Ok::<_, StepError>(FanResult { v: i.v })
                },
            ))
            .step(Step::new(
                "join",
                |_: FixedList<FanResult, 300>, _: StepCtx| async {
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow");
    Engine::new(
        workflow,
        Arc::new(crate::backend::memory::MemoryBackend::new()),
        opts,
    )
}

/// An engine told to keep no large tables (`kept_table_bytes: 0`) holds none once a
/// large run ended, and still runs the next one alike.
#[tokio::test(flavor = "current_thread")]
async fn an_engine_keeps_no_large_tables_past_its_kept_table_bytes() {
    use crate::event::UserMessageEvent;
    let engine = large_fan_out_engine_with(EngineOptions {
        keep_ended_runs: false,
        kept_table_bytes: 0,
        ..EngineOptions::default()
    });
    for _ in 0..2 {
        engine.run(UserMessageEvent::new("one")).await.unwrap();
        assert!(
            engine.shared.large_spare.lock().unwrap().is_none(),
            "nothing kept past the limit"
        );
    }
}

/// A run too large for its slot to be kept still hands its payloads' allocations to the
/// thread for the next run's events: a second fan-out of 300 reuses the first one's
/// instead of allocating 600 more.
#[tokio::test(flavor = "current_thread")]
async fn a_large_runs_payloads_serve_the_next_runs_events() {
    use crate::event::{UserMessageEvent, pooled_payloads};
    let engine = large_fan_out_engine();
    assert_eq!(pooled_payloads::<FanItem>().0, 0);
    for _ in 0..2 {
        engine.run(UserMessageEvent::new("go")).await.unwrap();
        assert_eq!(pooled_payloads::<FanItem>().0, 300);
        assert_eq!(pooled_payloads::<FanResult>().0, 300);
    }
}

/// A run too large for its slot to be kept leaves its tables to the engine, and the next
/// large fan-out takes them over (the same allocations, not new ones faulted in again);
/// its result is the same.
#[tokio::test(flavor = "current_thread")]
async fn a_large_fan_out_takes_over_the_tables_of_the_last_large_run() {
    use crate::event::UserMessageEvent;
    let engine = large_fan_out_engine();
    let kept = |e: &Engine| {
        let large = e.shared.large_spare.lock().unwrap();
        large
            .as_ref()
            .map(|t| (t.core.event_capacity(), t.payloads.as_ptr()))
    };
    assert_eq!(kept(&engine), None);
    engine.run(UserMessageEvent::new("one")).await.unwrap();
    let (events, first) = kept(&engine).expect("the large run's tables are kept");
    assert!(events >= 603, "room for {events} events");
    for n in 0..3 {
        let id = engine.run(UserMessageEvent::new("again")).await.unwrap();
        assert!(engine.snapshot(&id).is_none(), "ended runs are not kept");
        assert_eq!(
            kept(&engine),
            Some((events, first)),
            "run {n}: the same tables went round"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_slots_id_text_is_the_returned_run_id_and_unique_per_run_in_reused_slots() {
    use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
    let engine = forgetful_engine();
    let mut seen = std::collections::HashSet::new();
    for n in 0..4 {
        let id = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
        assert!(
            id.len() == 24 && id.bytes().all(|c| c.is_ascii_hexdigit()),
            "run {n}: {id}"
        );
        assert!(seen.insert(id.clone()), "run {n}: {id} was given before");
        let slot = engine
            .shared
            .slot(&id)
            .expect("a live run is found by its id");
        // A slot reused from an ended run (n > 0) shows the new run's id, however the
        // id is read: inline bytes, shared text made on first use, owned text.
        assert_eq!(slot.id_text().as_bytes(), id.as_bytes(), "run {n}");
        assert_eq!(&**slot.run_id(), id, "run {n}");
        assert_eq!(slot.run_id_string(), id, "run {n}");
        assert_eq!(engine.snapshot(&id).map(|s| s.run_id), Some(id.clone()));
        drop(slot);
        engine
            .send(&id, HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
        engine.wait_for_end(&id).await.unwrap();
        assert!(engine.snapshot(&id).is_none(), "run {n}: evicted");
        assert_eq!(engine.shared.spare_slots(), 1, "run {n}: its slot is kept");
    }
}

#[test]
fn a_run_id_that_is_not_engine_made_is_kept_as_given() {
    for id in ["r", "0123456789abcdef0123456X", "0123456789ABCDEF01234567"] {
        let text = RunIdText::from(id);
        assert!(matches!(text, RunIdText::Other(_)), "{id}");
        assert_eq!(text.as_bytes(), id.as_bytes());
    }
    let hex = "0123456789abcdef01234567";
    assert!(matches!(RunIdText::from(hex), RunIdText::Hex(_)));
    let engine = Engine::in_memory(asking());
    for id in ["r", hex] {
        let slot = RunSlot::new(
            id.into(),
            Thread::Given("t".into()),
            Run::new(engine.workflow().compiled().clone(), 1),
        );
        assert_eq!(
            (&**slot.run_id(), slot.run_id_string()),
            (id, id.to_string())
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_evicted_run_slot_is_reused_with_a_fresh_state() {
    use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
    let engine = forgetful_engine();
    let spare = |e: &Engine| e.shared.spare_slots();
    let a = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
    let first = logged(&engine, &a, 3).await;
    engine
        .send(&a, HumanInTheLoopResponseEvent::default())
        .await
        .unwrap();
    engine.wait_for_end(&a).await.unwrap();
    assert!(engine.snapshot(&a).is_none(), "an ended run is evicted");
    assert_eq!(spare(&engine), 1, "the evicted run's slot is kept");

    let b = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
    assert_eq!(spare(&engine), 0, "the new run took the kept slot");
    let snap = logged(&engine, &b, 3).await;
    assert_eq!(snap.run_id, b);
    assert_ne!(snap.thread_id, first.thread_id);
    assert_eq!(snap.run.log().len(), 3, "only the new run's events");
    assert_eq!(snap.payloads.len(), 3);
    assert_eq!(
        snap.payloads[0]
            .get::<UserMessageEvent>()
            .map(|m| m.message.as_str()),
        Some("b")
    );
    assert_eq!(snap.run.records().len(), first.run.records().len());
    assert_eq!(snap.failure, None);
    // Display numbering starts again at 0 for the new run's execution.
    assert_eq!(snap.display_by.len(), 1);
    let (seq, x) = snap.display_by[0];
    assert_eq!(
        snap.run.log()[seq as usize].id,
        derived_event_id(run_key(&b), x, 0x4000_0000)
    );
    engine
        .send(&b, HumanInTheLoopResponseEvent::default())
        .await
        .unwrap();
    engine.wait_for_end(&b).await.unwrap();
    assert_eq!(spare(&engine), 1);
}

/// An in-memory engine of one step that stops the run, keeping no ended runs (their
/// slots go to the spare list, buffers included).
fn one_stop_step_engine(name: &str) -> Engine {
    use crate::event::{StopEvent, UserMessageEvent};
    use crate::params::Required;
    use crate::workflow::{Step, StepError};
    let wf = Workflow::builder(name)
        .step(Step::new(
            "stop",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(StopEvent::default())
            },
        ))
        .build()
        .expect("valid workflow");
    Engine::new(
        wf,
        Arc::new(crate::backend::memory::MemoryBackend::new()),
        EngineOptions {
            keep_ended_runs: false,
            ..EngineOptions::default()
        },
    )
}

/// What `f` reads of the buffers of the first spare slot (an ended run's, recycled).
fn spare_scratch<R>(e: &Engine, f: impl FnOnce(&Scratch) -> R) -> R {
    let runs = e.shared.runs.read().unwrap_or_else(|p| p.into_inner());
    let slot = runs.spare.first().expect("the ended run's slot is kept");
    let st = slot.lock();
    f(st.scratch
        .as_ref()
        .expect("a recycled slot keeps its buffers"))
}

/// On a multi-thread runtime `Engine::run` binds its first step's events into input
/// vectors (on a current-thread one it extracts them: see the next test).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_recycled_slot_keeps_the_input_and_output_buffers_of_its_last_execution() {
    use crate::event::UserMessageEvent;
    let engine = one_stop_step_engine("One");
    let buffers = |e: &Engine| {
        spare_scratch(e, |sc| {
            (
                sc.spare_inputs.len(),
                sc.spare_inputs.iter().map(Vec::capacity).sum::<usize>(),
                sc.spare_outs.capacity(),
                sc.spare_inputs.as_ptr() as usize,
            )
        })
    };
    engine.run(UserMessageEvent::new("a")).await.unwrap();
    let (params, room, outs, at) = buffers(&engine);
    assert_eq!((params, room), (1, 1), "one parameter, room for its event");
    assert!(outs >= 1, "room for the step's output");
    engine.run(UserMessageEvent::new("b")).await.unwrap();
    assert_eq!(buffers(&engine).3, at, "the next run used the same vectors");
}

/// A typed start event's type is found by comparing its name's address with the
/// workflow's start types (the same type id as the name table gives); other types are
/// not in that list, and a name made at run time is still looked up by its text.
#[test]
fn a_typed_start_event_finds_its_type_without_the_name_table() {
    use crate::event::{Event, StopEvent, UserMessageEvent};
    use crate::params::Required;
    use crate::workflow::{Step, StepError};
    let wf = Workflow::builder("StartTypes")
        .step(Step::new(
            "stop",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(StopEvent::default())
            },
        ))
        .build()
        .expect("valid workflow");
    let engine = Engine::in_memory(wf);
    let shared = &engine.shared;
    let by_text = shared.type_ids.get(UserMessageEvent::NAME).copied();
    assert!(by_text.is_some());
    assert!(
        shared
            .start_types
            .iter()
            .any(|&(n, t)| n == UserMessageEvent::NAME && Some(t) == by_text),
        "the start type is listed with its id"
    );
    assert!(
        shared
            .start_types
            .iter()
            .all(|&(n, _)| n != StopEvent::NAME),
        "only start events are listed"
    );
    let typed = shared
        .incoming_named(
            UserMessageEvent::NAME.into(),
            Payload::typed(UserMessageEvent::new("a")),
            1,
            None,
        )
        .expect("a declared start event");
    let named = shared
        .incoming(
            &String::from(UserMessageEvent::NAME),
            Payload::typed(UserMessageEvent::new("a")),
            1,
            None,
        )
        .expect("the same type by its text");
    assert!(
        matches!((typed.ty, named.ty), (NewEventType::Known(a), NewEventType::Known(b)) if Some(a) == by_text && a == b)
    );
}

/// Where `Engine::run` drives all of a run's executions on its task (a current-thread
/// runtime, the in-memory store), the first step's typed inputs are extracted in the
/// start event's locked section, as the later steps' are: no input vectors are made, and
/// the output vector goes round from run to run.
#[tokio::test(flavor = "current_thread")]
async fn engine_run_extracts_its_first_steps_inputs_with_the_start_event_applied() {
    use crate::event::UserMessageEvent;
    let engine = one_stop_step_engine("OneExtracted");
    let buffers = |e: &Engine| {
        spare_scratch(e, |sc| {
            (
                sc.spare_inputs.len(),
                sc.spare_outs.capacity(),
                sc.spare_outs.as_ptr() as usize,
            )
        })
    };
    engine.run(UserMessageEvent::new("a")).await.unwrap();
    let (params, outs, at) = buffers(&engine);
    assert_eq!(params, 0, "no input vectors: the inputs were extracted");
    assert!(outs >= 1, "room for the step's output");
    engine.run(UserMessageEvent::new("b")).await.unwrap();
    assert_eq!(
        buffers(&engine).2,
        at,
        "the next run used the same output vector"
    );
}

/// The display counter is recycled along an inline chain: each execution still numbers
/// its display events from 0 (their derived ids are what prevents showing them twice
/// after a crash).
#[tokio::test(flavor = "current_thread")]
async fn every_execution_of_an_inline_chain_numbers_its_display_events_from_zero() {
    use crate::event::{
        ChunkEvent, HumanInTheLoopRequestEvent, HumanInTheLoopResponseEvent, StopEvent,
        UserMessageEvent,
    };
    use crate::params::Required;
    use crate::workflow::{Step, StepError};
    async fn show_two(ctx: &StepCtx) -> Result<(), StepError> {
        for _ in 0..2 {
            ctx.display(&ChunkEvent::default())
                .await
                .map_err(|e| StepError::new(e.to_string()))?;
        }
        Ok(())
    }
    let wf = Workflow::builder("Shows")
        .step(Step::new(
            "a",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                show_two(&ctx).await?;
                Ok::<_, StepError>(HumanInTheLoopRequestEvent::default())
            },
        ))
        .step(Step::new(
            "b",
            |_: Required<HumanInTheLoopRequestEvent>, ctx: StepCtx| async move {
                show_two(&ctx).await?;
                Ok::<_, StepError>(HumanInTheLoopResponseEvent::default())
            },
        ))
        .step(Step::new(
            "c",
            |_: Required<HumanInTheLoopResponseEvent>, ctx: StepCtx| async move {
                show_two(&ctx).await?;
                Ok::<_, StepError>(StopEvent::default())
            },
        ))
        .build()
        .expect("valid workflow");
    let engine = Engine::in_memory(wf);
    let run = engine.run(UserMessageEvent::new("go")).await.unwrap();
    let snap = engine.snapshot(&run).unwrap();
    assert!(snap.has_stop(), "{}", snap.timeline());
    let mut by_execution: Vec<(ExecutionId, Vec<EventId>)> = Vec::new();
    for &(seq, x) in &snap.display_by {
        let id = snap.run.log()[seq as usize].id;
        match by_execution.iter_mut().find(|(e, _)| *e == x) {
            Some((_, ids)) => ids.push(id),
            None => by_execution.push((x, vec![id])),
        }
    }
    assert_eq!(by_execution.len(), 3);
    for (x, ids) in by_execution {
        let expected: Vec<EventId> = (0..2)
            .map(|n| derived_event_id(run_key(&run), x, 0x4000_0000 | n))
            .collect();
        assert_eq!(ids, expected, "execution {x:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_start_event_is_applied_through_the_threads_pending_buffer_left_empty_for_the_next() {
    use crate::event::UserMessageEvent;
    let engine = forgetful_engine();
    UNSCRATCHED_PENDING.set(Vec::new());
    let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
    let kept = UNSCRATCHED_PENDING.take();
    assert!(kept.is_empty(), "no payload is left behind");
    assert!(
        kept.capacity() >= 1,
        "the buffer is kept for the next start"
    );
    UNSCRATCHED_PENDING.set(kept);
    let snap = logged(&engine, &id, 3).await;
    assert_eq!(
        snap.payloads[0]
            .get::<UserMessageEvent>()
            .map(|m| m.message.as_str()),
        Some("q"),
        "the start event's payload went to the run"
    );
}

/// The in-memory store, except that it fails to store a run's end.
struct FailsAtTheEnd(crate::backend::memory::MemoryBackend);

impl Backend for FailsAtTheEnd {
    fn name(&self) -> &'static str {
        "fails-at-the-end"
    }
    fn wants_journal(&self) -> bool {
        false
    }
    fn persist(&self, batch: PersistBatch) -> Pending<()> {
        if batch.ended {
            return Pending::Ready(Err(StoreError::Io {
                detail: "disk full".into(),
            }));
        }
        self.0.persist(batch)
    }
    fn load_runs(&self, workflow: &str, live_only: bool) -> Pending<Vec<StoredRun>> {
        self.0.load_runs(workflow, live_only)
    }
    fn list_runs(
        &self,
        workflow: &str,
        query: &crate::backend::RunQuery,
    ) -> Pending<crate::backend::RunPage> {
        self.0.list_runs(workflow, query)
    }
    fn read_run(&self, workflow: &str, run_id: &str) -> Pending<Option<StoredRun>> {
        self.0.read_run(workflow, run_id)
    }
    fn ctx_get(
        &self,
        scope: crate::backend::Scope,
        key: &str,
    ) -> Pending<Option<serde_json::Value>> {
        self.0.ctx_get(scope, key)
    }
    fn ctx_set(
        &self,
        scope: crate::backend::Scope,
        key: &str,
        value: serde_json::Value,
    ) -> Pending<()> {
        self.0.ctx_set(scope, key, value)
    }
    fn ctx_delete(&self, scope: crate::backend::Scope, key: &str) -> Pending<()> {
        self.0.ctx_delete(scope, key)
    }
    fn halt(&self) {
        self.0.halt()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_storage_failure_at_the_end_wakes_the_runs_waiters_and_shows_on_the_run() {
    use crate::event::UserMessageEvent;
    let engine = Engine::new(
        asking(),
        Arc::new(FailsAtTheEnd(crate::backend::memory::MemoryBackend::new())),
        EngineOptions::default(),
    );
    let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
    logged(&engine, &id, 3).await;
    let waiter = spawn_waiter(&engine, &id);
    tokio::task::yield_now().await;
    assert_eq!(waiting(&engine, &id), 1);
    answer_and_expect_woken(&engine, &id, waiter, "the failure wakes the waiter").await;
    let snap = engine.snapshot(&id).expect("kept");
    assert!(snap.run.is_terminated(), "the core ended the run");
    let st = engine.shared.slot(&id).unwrap();
    let st = st.lock();
    assert!(!st.end_durable, "an end the store refused is not durable");
    assert!(
        st.failure
            .as_deref()
            .is_some_and(|f| f.contains("disk full"))
    );
}

/// How many tasks wait for run `id`'s end.
fn waiting(engine: &Engine, id: &str) -> usize {
    engine.shared.slot(id).unwrap().lock().waiters.len()
}

#[tokio::test(flavor = "current_thread")]
async fn every_task_waiting_for_a_runs_end_is_woken_by_it() {
    use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
    let engine = Engine::in_memory(asking());
    let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
    logged(&engine, &id, 3).await;
    let waiters: Vec<_> = (0..3).map(|_| spawn_waiter(&engine, &id)).collect();
    tokio::task::yield_now().await;
    assert_eq!(waiting(&engine, &id), 3, "each waiter registered once");
    // Polled again before the end (woken by something else): still one registration each.
    for _ in 0..2 {
        tokio::task::yield_now().await;
    }
    assert_eq!(waiting(&engine, &id), 3);
    // A fourth gives up while the others wait: only its registration goes.
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(1),
        engine.wait_for_end(&id),
    )
    .await;
    assert!(gave_up.is_err());
    assert_eq!(waiting(&engine, &id), 3, "the others stay registered");
    engine
        .send(&id, HumanInTheLoopResponseEvent::default())
        .await
        .unwrap();
    for w in waiters {
        tokio::time::timeout(std::time::Duration::from_secs(10), w)
            .await
            .expect("every waiter is woken by the end")
            .unwrap()
            .unwrap();
    }
    assert_eq!(waiting(&engine, &id), 0, "the end took every registration");
    // A waiter that comes after the end returns at once.
    engine.wait_for_end(&id).await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_wait_for_end_given_up_leaves_no_registration_behind() {
    use crate::event::UserMessageEvent;
    let engine = Engine::in_memory(asking());
    let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
    logged(&engine, &id, 3).await;
    for _ in 0..50 {
        let gave_up = tokio::time::timeout(
            std::time::Duration::from_millis(1),
            engine.wait_for_end(&id),
        )
        .await;
        assert!(gave_up.is_err(), "the run waits for an answer");
    }
    assert_eq!(
        waiting(&engine, &id),
        0,
        "each waiter unregistered when dropped"
    );
    let waiter = spawn_waiter(&engine, &id);
    tokio::task::yield_now().await;
    answer_and_expect_woken(
        &engine,
        &id,
        waiter,
        "a waiter after others gave up is still woken",
    )
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn runs_evicted_while_many_are_in_flight_still_end_for_their_waiters() {
    use crate::event::UserMessageEvent;
    let engine = forgetful_engine();
    // More runs in flight than ended slots are kept: the first ones to end have their
    // tables freed at once, while their waiters still hold them.
    let mut ids = Vec::new();
    for _ in 0..SPARE_SLOTS + 16 {
        ids.push(engine.start_run(UserMessageEvent::new("q")).await.unwrap());
    }
    for id in &ids {
        logged(&engine, id, 3).await;
    }
    answer_all_while_waited_for(&engine, &ids).await;
    assert!(
        engine.run_ids().is_empty(),
        "every ended run left the engine"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_fresh_run_about_to_execute_takes_over_the_tables_of_a_run_evicted_in_flight() {
    use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
    let engine = forgetful_engine();
    let kept = |e: &Engine| e.shared.spare_tables.lock().map(|v| v.len()).unwrap_or(0);
    // Runs evicted while more than SPARE_SLOTS are in flight, their waiters holding
    // them: their tables are kept for other runs.
    let mut ids = Vec::new();
    for _ in 0..SPARE_SLOTS + 2 {
        ids.push(engine.start_run(UserMessageEvent::new("q")).await.unwrap());
    }
    let mut first = None;
    for id in &ids {
        first = Some(logged(&engine, id, 3).await);
    }
    let first = first.unwrap();
    answer_all_while_waited_for(&engine, &ids).await;
    let before = kept(&engine);
    assert!(before > 0, "the tables of runs evicted in flight are kept");
    // A fresh slot (no ended one to reuse): its run takes over kept tables when its
    // first execution is bound, and runs exactly like a run that grew its own.
    engine.shared.runs.write().unwrap().spare.clear();
    let b = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
    let snap = logged(&engine, &b, 3).await;
    assert_eq!(
        kept(&engine),
        before - 1,
        "the new run took one set of tables"
    );
    assert_eq!(snap.run.log().len(), 3, "only the new run's events");
    assert_eq!(snap.payloads.len(), 3);
    assert_eq!(
        snap.payloads[0]
            .get::<UserMessageEvent>()
            .map(|m| m.message.as_str()),
        Some("b")
    );
    assert_eq!(snap.run.records(), first.run.records());
    assert_eq!(snap.run.executions().len(), first.run.executions().len());
    assert_eq!(snap.display_by.len(), 1);
    engine
        .send(&b, HumanInTheLoopResponseEvent::default())
        .await
        .unwrap();
    engine.wait_for_end(&b).await.unwrap();
    assert!(engine.snapshot(&b).is_none(), "an ended run is evicted");
}

#[tokio::test(flavor = "current_thread")]
async fn a_reused_slot_whose_tables_were_kept_for_others_takes_kept_tables_when_its_run_starts() {
    use crate::event::UserMessageEvent;
    let engine = forgetful_engine();
    let kept = |e: &Engine| e.shared.spare_tables.lock().map(|v| v.len()).unwrap_or(0);
    let spare_slots = |e: &Engine| e.shared.spare_slots();
    let a = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
    let b = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
    let first = logged(&engine, &a, 3).await;
    logged(&engine, &b, 3).await;
    // `a` ends while `b` is in flight: its tables are kept for other runs, and its slot,
    // let go by its waiter, for a new run.
    answer_all_while_waited_for(&engine, std::slice::from_ref(&a)).await;
    assert_eq!(
        kept(&engine),
        1,
        "the tables of a run evicted in flight are kept"
    );
    assert_eq!(spare_slots(&engine), 1, "its slot is kept for a new run");
    let c = engine.start_run(UserMessageEvent::new("c")).await.unwrap();
    // Its first execution is not bound yet (the engine's driver has not run): the
    // tables were taken when the run was made.
    assert_eq!(spare_slots(&engine), 0, "the new run reused the slot");
    assert_eq!(kept(&engine), 0, "and took the kept tables at once");
    let snap = logged(&engine, &c, 3).await;
    assert_eq!(snap.run.log().len(), 3, "only the new run's events");
    assert_eq!(snap.run.records(), first.run.records());
    assert_eq!(
        snap.payloads[0]
            .get::<UserMessageEvent>()
            .map(|m| m.message.as_str()),
        Some("c")
    );
    answer_all_while_waited_for(&engine, &[b, c]).await;
    assert!(
        engine.run_ids().is_empty(),
        "every ended run left the engine"
    );
}

/// Answers at once, or after a long wait when the message says "slow".
fn slow_or_fast() -> Workflow {
    use crate::event::{StopEvent, UserMessageEvent};
    use crate::params::Required;
    use crate::workflow::{Step, StepError};
    Workflow::builder("SlowOrFast")
        .step(Step::new(
            "answer",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                if q.message == "slow" {
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
                Ok::<_, StepError>(StopEvent::default())
            },
        ))
        .build()
        .expect("valid workflow")
}

/// Starts a run with `message` and waits (at most 10 s) until it ended.
async fn started_and_ended(engine: &Engine, message: &str, what: &str) {
    let run = engine
        .start_run(crate::event::UserMessageEvent::new(message))
        .await
        .unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        engine.wait_for_end(&run),
    )
    .await
    .unwrap_or_else(|_| panic!("{what}"))
    .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_waiting_body_on_the_engine_driver_does_not_hold_up_other_runs() {
    use crate::event::UserMessageEvent;
    let engine = Engine::in_memory(slow_or_fast());
    let slow = engine
        .start_run(UserMessageEvent::new("slow"))
        .await
        .unwrap();
    started_and_ended(
        &engine,
        "fast",
        "the fast run ends while the slow one waits",
    )
    .await;
    let snap = engine.snapshot(&slow).unwrap();
    assert_eq!(snap.running(), 1, "the slow run's body still waits");
    started_and_ended(&engine, "fast", "a run started later ends too").await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_kept_ended_run_holds_tables_no_larger_than_their_contents() {
    // A run's tables start small and grow by doubling; an engine that keeps ended runs
    // (the default) gives the spare capacity back when a run ends.
    let engine = Engine::in_memory(slow_or_fast());
    let run = engine
        .start_run(crate::event::UserMessageEvent::new("fast"))
        .await
        .unwrap();
    engine.wait_for_end(&run).await.unwrap();
    let slot = engine.shared.slot(&run).unwrap();
    let st = slot.lock();
    assert!(
        st.run.records().len() > 4,
        "the records outgrew their first size"
    );
    // A clone's tables are exact.
    assert_eq!(st.run.memory_bytes(), st.run.clone().memory_bytes());
    assert_eq!(st.payloads.capacity(), st.payloads.len());
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime on this thread whose task (the engine's driver) started a slow run's body,
/// which waits; the thread has left the runtime when this returns.
fn runtime_with_a_waiting_body(engine: &Engine) -> tokio::runtime::Runtime {
    let runtime = current_thread_runtime();
    runtime.block_on(async {
        engine
            .start_run(crate::event::UserMessageEvent::new("slow"))
            .await
            .unwrap();
        tokio::task::yield_now().await;
    });
    runtime
}

#[test]
fn runs_started_on_another_runtime_are_driven_there() {
    // Current-thread runtimes on two threads share an engine; the first one's thread
    // has left its runtime (its driver task is not polled until it comes back): runs
    // started on the second must not wait for it.
    let engine = Engine::in_memory(slow_or_fast());
    let first = runtime_with_a_waiting_body(&engine);
    let other = engine.clone();
    std::thread::spawn(move || {
        current_thread_runtime().block_on(started_and_ended(
            &other,
            "fast",
            "a run started on the second runtime ends there",
        ))
    })
    .join()
    .unwrap();
    drop(first);
}

#[test]
fn the_engine_driver_is_replaced_when_its_runtime_goes_away() {
    let engine = Engine::in_memory(slow_or_fast());
    // The driver task is dropped with its runtime, in the middle of its work.
    drop(runtime_with_a_waiting_body(&engine));
    current_thread_runtime().block_on(started_and_ended(
        &engine,
        "fast",
        "a new driver runs the new run",
    ));
}

#[test]
fn engines_keeping_ended_runs_reuse_no_slot() {
    let engine = Engine::in_memory(asking());
    let slot = Arc::new(RunSlot::new(
        "r".into(),
        Thread::Given("t".into()),
        Run::new(engine.workflow().compiled().clone(), 1),
    ));
    engine.shared.release(slot);
    assert_eq!(engine.shared.spare_slots(), 0);
}

#[test]
fn error_codes_are_stable() {
    let e = EngineError::UnknownRun { run_id: "x".into() };
    assert_eq!(e.code(), "SAAP-E001");
    assert!(e.to_string().starts_with("SAAP-E001"));
    assert_eq!(EngineError::Store(StoreError::Halted).code(), "SAAP-S005");
}

/// A run being made is held before its start event is applied: `run_ids` must not list it
/// yet, or a caller that sends to a listed run gets "not a start event" (seen as a flaky
/// `engine_run::events_sent_to_a_run_driven_by_its_caller_are_dispatched`).
#[tokio::test(flavor = "current_thread")]
async fn a_run_whose_start_is_not_applied_yet_is_not_listed() {
    use crate::event::UserMessageEvent;
    let engine = Engine::in_memory(slow_or_fast());
    let ids = engine.shared.ids.next_run();
    let ev = engine
        .shared
        .incoming_named(
            UserMessageEvent::NAME.into(),
            Payload::typed(UserMessageEvent::new("slow")),
            64,
            Some(ids.start),
        )
        .unwrap();
    let slot = engine.shared.new_run(None, &ev, ids).unwrap();
    assert!(engine.has_run(slot.run_id()), "held");
    assert_eq!(
        engine.run_ids(),
        Vec::<String>::new(),
        "not listed before its start"
    );
    engine
        .shared
        .apply_with(&slot, Input::Append(ev), Vec::new(), Bind::Events)
        .unwrap();
    assert_eq!(engine.run_ids(), vec![slot.run_id().to_string()]);
}
