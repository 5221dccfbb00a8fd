//! The DESIGN §4 rules, one test each, on the in-memory and the SQLite backend (same body).
#![allow(clippy::unwrap_used)]

mod common;

use common::{Kind, WAIT, harness};
use saap::testing::WaitError;
use saap::{
    Either, ExceptionEvent, FixedList, Required, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(SubA, "A");
event!(Part, "ControlEvent");
event!(Note, "DisplayEvent");
event!(Done, "StopEvent");
event!(Late, "ControlEvent");

type R = Result<(), StepError>;

fn ok<T>(t: T) -> Result<T, StepError> {
    Ok(t)
}

on_both_backends! {
    r4_1_candidacy_exact_name_only => candidacy_exact_name_only;
    r4_1_union_parameter_takes_either_type => union_parameter_takes_either_type;
    r4_2_view_is_the_log_prefix_at_the_trigger => view_is_the_log_prefix_at_the_trigger;
    r4_3_readiness_waits_for_every_required_input => readiness_waits_for_every_required_input;
    r4_3_fixed_list_waits_for_n => fixed_list_waits_for_n;
    r4_3_max_executions_per_run_bounds_reruns => max_executions_per_run_bounds_reruns;
    r4_3_precondition_sees_bound_inputs => precondition_sees_bound_inputs;
    r4_4_optional_parameter_reruns_when_it_arrives => optional_parameter_reruns_when_it_arrives;
    r4_4_list_binds_all_in_arrival_order => list_binds_all_in_arrival_order;
    r4_4_fixed_list_binds_first_n_and_overflow_binds_nothing => fixed_list_binds_first_n_and_overflow_binds_nothing;
    r4_4_union_list_and_fixed_list_bind_every_member_in_arrival_order => union_list_and_fixed_list_bind_every_member_in_arrival_order;
    r4_5_duplicate_event_id_runs_nothing_twice => duplicate_event_id_runs_nothing_twice;
    r4_6_outputs_append_in_return_order_and_run_context_is_shared => outputs_in_return_order_and_run_context;
    r4_7_events_after_stop_are_kept_not_dispatched => events_after_stop_are_kept_not_dispatched;
    r4_8_failure_with_stop_on_error_ends_the_run => failure_with_stop_on_error_ends_the_run;
    r4_8_failure_without_stop_on_error_continues => failure_without_stop_on_error_continues;
    r4_8_panic_is_a_failure => panic_is_a_failure;
    r4_10_run_begins_only_with_a_start_event => run_begins_only_with_a_start_event;
    r4_11_decision_records_explain_skips => decision_records_explain_skips;
    r4_9_a_redelivered_output_is_dropped_by_its_id => a_redelivered_output_is_dropped_by_its_id;
    test_runner_timeout_says_what_the_run_waits_for => timeout_says_what_the_run_waits_for;
}

async fn candidacy_exact_name_only(kind: Kind) {
    let wf = Workflow::builder("Candidacy")
        .step(Step::new(
            "emit_sub",
            |_: Required<UserMessageEvent>, _: StepCtx| async { ok(SubA { n: 1 }) },
        ))
        .step(Step::new(
            "wants_parent",
            |_: Required<A>, _: StepCtx| async { ok(B::default()) },
        ))
        .step(Step::new(
            "wants_sub",
            |_: Required<SubA>, _: StepCtx| async { ok(Done::default()) },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.executions_of("wants_sub"), 1);
    assert_eq!(
        run.executions_of("wants_parent"),
        0,
        "a subtype must not match a parent-typed parameter"
    );
}

async fn union_parameter_takes_either_type(kind: Kind) {
    let wf = Workflow::builder("Union")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new(
            "either",
            |e: Either<A, B>, _: StepCtx| async move {
                ok(match e {
                    Either::Left(a) => Part { n: a.n },
                    Either::Right(b) => Part { n: 100 + b.n },
                })
            },
        ))
        .build()
        .unwrap();
    assert_eq!(wf.spec().steps[1].params[0].types, vec!["A", "B"]);
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(B { n: 2 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(A { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(
        run.events_of::<Part>(),
        vec![Part { n: 102 }, Part { n: 1 }]
    );
}

async fn view_is_the_log_prefix_at_the_trigger(kind: Kind) {
    let wf = Workflow::builder("View")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new(
            "pair",
            |(a, b): (Required<A>, Required<B>), _: StepCtx| async move {
                ok(Part { n: a.n * 10 + b.n })
            },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    for (is_a, n) in [(true, 1), (false, 1), (true, 2), (false, 2)] {
        if is_a {
            run.send(A { n }).await.unwrap();
        } else {
            run.send(B { n }).await.unwrap();
        }
        run.wait_idle(WAIT).await.unwrap();
    }
    // Each trigger binds itself and the latest other input *at its arrival*.
    let got: Vec<u32> = run.events_of::<Part>().iter().map(|p| p.n).collect();
    assert_eq!(got, vec![11, 21, 22]);
}

async fn readiness_waits_for_every_required_input(kind: Kind) {
    let wf =
        Workflow::builder("Readiness")
            .step(Step::new(
                "join",
                |(a, b): (Required<A>, Required<B>), _: StepCtx| async move {
                    ok(Done { n: a.n + b.n })
                },
            ))
            .step(Step::new(
                "start",
                |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
            ))
            .build()
            .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(A { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("join"), 0);
    run.send(B { n: 2 }).await.unwrap();
    let done = run.wait_for_event::<Done>(WAIT).await.unwrap();
    assert_eq!(done.n, 3);
    assert_eq!(run.executions_of("join"), 1);
}

async fn fixed_list_waits_for_n(kind: Kind) {
    let wf = Workflow::builder("FixedWait")
        .step(Step::new(
            "fan_out",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                ok((1..=3).map(|n| Part { n }).collect::<Vec<_>>())
            },
        ))
        .step(Step::new(
            "join",
            |parts: FixedList<Part, 3>, _: StepCtx| async move {
                ok(Done {
                    n: parts.iter().map(|p| p.n).sum(),
                })
            },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    assert_eq!(run.wait_for_event::<Done>(WAIT).await.unwrap().n, 6);
    assert_eq!(run.executions_of("join"), 1);
}

async fn max_executions_per_run_bounds_reruns(kind: Kind) {
    let wf = Workflow::builder("Budget")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(
            Step::new("each", |_: Required<A>, _: StepCtx| async { R::Ok(()) })
                .max_executions_per_run(2),
        )
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    for n in 0..5 {
        run.send(A { n }).await.unwrap();
    }
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("each"), 2);
}

async fn precondition_sees_bound_inputs(kind: Kind) {
    let wf = Workflow::builder("Precondition")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(
            Step::new(
                "answer",
                |(a, b): (Required<A>, Option<B>), _: StepCtx| async move {
                    ok(Done {
                        n: a.n + b.map(|b| b.n).unwrap_or(100),
                    })
                },
            )
            .precondition("b_arrived", |(_, b): &(Required<A>, Option<B>)| b.is_some()),
        )
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(A { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("answer"), 0);
    run.send(B { n: 2 }).await.unwrap();
    assert_eq!(run.wait_for_event::<Done>(WAIT).await.unwrap().n, 3);
    assert_eq!(run.executions_of("answer"), 1);
}

async fn optional_parameter_reruns_when_it_arrives(kind: Kind) {
    let wf = Workflow::builder("OptionalTrap")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new(
            "answer",
            |(_a, _b): (Required<A>, Option<B>), _: StepCtx| async move { R::Ok(()) },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(A { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(B { n: 2 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(
        run.executions_of("answer"),
        2,
        "R1 then R2: once without B, once with B"
    );
}

async fn list_binds_all_in_arrival_order(kind: Kind) {
    let wf = Workflow::builder("List")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new(
            "collect",
            |(parts, _b): (Vec<Part>, Required<B>), _: StepCtx| async move {
                ok(Done {
                    n: parts.iter().fold(0, |acc, p| acc * 10 + p.n),
                })
            },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    for n in [3, 1, 2] {
        run.send(Part { n }).await.unwrap();
    }
    run.send(B::default()).await.unwrap();
    assert_eq!(run.wait_for_event::<Done>(WAIT).await.unwrap().n, 312);
}

async fn fixed_list_binds_first_n_and_overflow_binds_nothing(kind: Kind) {
    let wf = Workflow::builder("Overflow")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new(
            "pair",
            |parts: FixedList<Part, 2>, _: StepCtx| async move {
                ok(A {
                    n: parts[0].n * 10 + parts[1].n,
                })
            },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    for n in [1, 2, 3] {
        run.send(Part { n }).await.unwrap();
    }
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.events_of::<A>(), vec![A { n: 12 }]);
    assert_eq!(run.executions_of("pair"), 1);
    assert!(
        run.timeline().contains("binds nothing"),
        "{}",
        run.timeline()
    );
}

/// `A` as 1..9, `B` as 10..90: a sequence of either reads as its digits in order.
fn digits(items: &[Either<A, B>]) -> u32 {
    items.iter().fold(0, |acc, e| {
        acc * 10
            + match e {
                Either::Left(a) => a.n,
                Either::Right(b) => b.n / 10,
            }
    })
}

async fn union_list_and_fixed_list_bind_every_member_in_arrival_order(kind: Kind) {
    let wf = Workflow::builder("UnionLists")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new(
            "first_three",
            |items: FixedList<Either<A, B>, 3>, _: StepCtx| async move {
                ok(Part { n: digits(&items) })
            },
        ))
        .step(Step::new(
            "all",
            |(items, _late): (Vec<Either<A, B>>, Required<Late>), _: StepCtx| async move {
                ok(Done { n: digits(&items) })
            },
        ))
        .build()
        .unwrap();
    for s in &wf.spec().steps[1..] {
        assert_eq!(s.params[0].types, vec!["A", "B"], "step {}", s.name);
    }
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(B { n: 30 }).await.unwrap();
    run.send(A { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("first_three"), 0, "two of three");
    run.send(A { n: 4 }).await.unwrap();
    run.send(B { n: 20 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(
        run.events_of::<Part>(),
        vec![Part { n: 314 }],
        "the first three of either type; the fourth binds nothing"
    );
    run.send(Late::default()).await.unwrap();
    assert_eq!(run.wait_for_event::<Done>(WAIT).await.unwrap().n, 3142);
    assert_eq!(run.executions_of("first_three"), 1);
}

async fn duplicate_event_id_runs_nothing_twice(kind: Kind) {
    let wf = Workflow::builder("Dedup")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { R::Ok(()) },
        ))
        .step(Step::new("each", |_: Required<A>, _: StepCtx| async {
            R::Ok(())
        }))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    let wire = br#"{"event_id":"65f0a1b2c3d4e5f601234567","created_at":1,"_event_name":"A","_parent_event_names":["A","ControlEvent"],"n":7}"#;
    for _ in 0..3 {
        h.runner
            .engine()
            .send_json(run.run_id(), wire)
            .await
            .unwrap();
    }
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("each"), 1);
    assert_eq!(run.events_of::<A>(), vec![A { n: 7 }]);
}

async fn outputs_in_return_order_and_run_context(kind: Kind) {
    let wf = Workflow::builder("Order")
        .step(Step::new(
            "first",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                ctx.run_context()
                    .set("count", &41u32)
                    .await
                    .map_err(|e| StepError::new(e.to_string()))?;
                ok((Part { n: 1 }, Part { n: 2 }, A::default()))
            },
        ))
        .step(Step::new(
            "second",
            |_: Required<A>, ctx: StepCtx| async move {
                let c: u32 = ctx
                    .run_context()
                    .get("count")
                    .await
                    .map_err(|e| StepError::new(e.to_string()))?
                    .unwrap_or(0);
                ok(Done { n: c + 1 })
            },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    assert_eq!(run.wait_for_event::<Done>(WAIT).await.unwrap().n, 42);
    assert_eq!(run.events_of::<Part>(), vec![Part { n: 1 }, Part { n: 2 }]);
}

async fn events_after_stop_are_kept_not_dispatched(kind: Kind) {
    let wf = Workflow::builder("AfterStop")
        .step(Step::new(
            "stop",
            |_: Required<UserMessageEvent>, _: StepCtx| async { ok(Done::default()) },
        ))
        .step(Step::new("late", |_: Required<Late>, _: StepCtx| async {
            ok(A::default())
        }))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_for_end(WAIT).await.unwrap();
    run.send(Late::default()).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(snap.executions_of("late"), 0);
    assert_eq!(snap.events_of::<Late>().len(), 1, "kept as evidence");
    assert!(
        snap.timeline().contains("after the stop"),
        "{}",
        snap.timeline()
    );
}

async fn failure_with_stop_on_error_ends_the_run(kind: Kind) {
    let wf = Workflow::builder("Fails")
        .step(Step::new(
            "boom",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Err::<A, _>(StepError::new("model unavailable"))
            },
        ))
        .step(Step::new("never", |_: Required<A>, _: StepCtx| async {
            ok(Done::default())
        }))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    let ex = run.wait_for_event::<ExceptionEvent>(WAIT).await.unwrap();
    assert_eq!(ex.message, "model unavailable");
    assert_eq!(ex.http_status_code, 500);
    assert!(run.has_exception());
    assert!(!run.has_stop());
}

async fn failure_without_stop_on_error_continues(kind: Kind) {
    let wf = Workflow::builder("Continues")
        .step(
            Step::new("flaky", |_: Required<UserMessageEvent>, _: StepCtx| async {
                Err::<A, _>(StepError::new("transient"))
            })
            .stop_on_error(false),
        )
        .step(Step::new(
            "other",
            |_: Required<UserMessageEvent>, _: StepCtx| async { ok(Done::default()) },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_for_event::<Done>(WAIT).await.unwrap();
    // On a multi-thread runtime `flaky` and `other` run at once: `Done` may come first.
    run.wait_for_end(WAIT).await.unwrap();
    assert!(!run.has_exception());
    assert!(run.timeline().contains("transient"));
}

async fn panic_is_a_failure(kind: Kind) {
    let wf = Workflow::builder("Panics")
        .step(Step::new(
            "boom",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                if q.message == "go" {
                    panic!("index out of bounds");
                }
                ok(Done::default())
            },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    let ex = run.wait_for_event::<ExceptionEvent>(WAIT).await.unwrap();
    assert!(
        ex.message.contains("panicked") && ex.message.contains("index out of bounds"),
        "{}",
        ex.message
    );
}

async fn run_begins_only_with_a_start_event(kind: Kind) {
    let wf = Workflow::builder("Lifecycle")
        .step(Step::new(
            "s",
            |_: Required<UserMessageEvent>, _: StepCtx| async { ok(Done::default()) },
        ))
        .step(Step::new("t", |_: Required<A>, _: StepCtx| async {
            R::Ok(())
        }))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let err = h.runner.start(A::default()).await.err().unwrap();
    assert_eq!(err.code(), "SAAP-E002", "{err}");
    let err = h
        .runner
        .engine()
        .send("no-such-run", A::default())
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), "SAAP-E001", "{err}");
    assert!(
        h.runner.engine().run_ids().is_empty(),
        "no run is created implicitly"
    );
}

async fn decision_records_explain_skips(kind: Kind) {
    let wf = Workflow::builder("Records")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { ok(A::default()) },
        ))
        .step(Step::new(
            "join",
            |(_a, _b): (Required<A>, Required<B>), _: StepCtx| async { R::Ok(()) },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    let t = snap.timeline();
    assert!(t.contains("candidate `join`"), "{t}");
    assert!(
        t.contains("skip `join`: required parameter `b` (B) has no event"),
        "{t}"
    );
    assert!(t.contains("start x0 `start`"), "{t}");
}

async fn a_redelivered_output_is_dropped_by_its_id(kind: Kind) {
    let wf = Workflow::builder("Redeliver")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { ok(A { n: 1 }) },
        ))
        .step(Step::new("each", |_: Required<A>, _: StepCtx| async {
            R::Ok(())
        }))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    let a = snap.events().into_iter().find(|e| e.name == "A").unwrap();
    // The same output published again (e.g. by a re-run execution) carries the same id.
    let wire = format!(
        r#"{{"event_id":"{}","created_at":1,"_event_name":"A","_parent_event_names":["A","ControlEvent"],"n":1}}"#,
        a.id
    );
    h.runner
        .engine()
        .send_json(run.run_id(), wire.as_bytes())
        .await
        .unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(snap.executions_of("each"), 1);
    assert_eq!(snap.events_of::<A>().len(), 1);
    assert!(
        snap.timeline().contains("duplicate of #1 A"),
        "{}",
        snap.timeline()
    );
}

async fn timeout_says_what_the_run_waits_for(kind: Kind) {
    let wf = Workflow::builder("Stuck")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                ok(Either::<A, B>::Left(A::default()))
            },
        ))
        .step(Step::new(
            "join",
            |(_a, _p): (Required<A>, FixedList<Part, 2>), _: StepCtx| async { ok(Done::default()) },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(Part::default()).await.unwrap();
    let err = run
        .wait_for_event::<Done>(std::time::Duration::from_millis(50))
        .await
        .err()
        .unwrap();
    let WaitError::Timeout { waiting, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        waiting.contains("step `join` waits for: fixed list `part` (Part) has 1 of 2"),
        "{waiting}"
    );
}
