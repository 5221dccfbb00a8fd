//! `saap demo`: the guided first minute. Runs the example agents on the embedded engine
//! (SQLite in a temporary directory, no setup), prints a run's timeline and the workflow
//! graph (Mermaid), waits on a human in the loop (across a crash, and past a deadline), shows
//! an agent delegating to another (the tree of runs, then a cancel that covers it), then
//! checks a broken agent statically and shows the symptom in its execution counts next to
//! its fixed twin.

use anyhow::Context as _;
use saap::ChunkEvent;
use saap::semantic::{LLMCostEvent, LLMEvent};
use saap::testing::TestRunner;
use saap::{Engine, EngineOptions, SqliteBackend, UserMessageEvent, Workflow};
use saap_dispatch::check::{Finding, check};
use saap_examples::approval::{self, ApprovalGiven, ApprovalRequested, Executed, Expired};
use saap_examples::broken::{self, Published, ReviewClosed, ReviewNotes};
use saap_examples::rag::{self, Answered};
use saap_examples::rag_model;
use saap_examples::research::{self, Brief, NeedsSource, SourceGiven};
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  saap demo            the guided demo, as text
  saap demo --json     the same results as one JSON object
  saap demo --keep     keep the demo database and print its path")]
pub struct DemoArgs {
    /// Print the results as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Keep the SQLite database in the temporary directory (its path is printed).
    #[arg(long)]
    keep: bool,
}

/// Every wait in the demo is bounded; the agents are scripted and finish in milliseconds.
const WAIT: Duration = Duration::from_secs(30);

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let dir = tempfile::Builder::new()
        .prefix("saap-demo-")
        .tempdir()
        .context("cannot create a temporary directory for the demo database")?;
    let report = rt.block_on(demo(dir.path()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.json)?);
    } else {
        print!("{}", report.text);
    }
    if args.keep {
        let kept = dir.keep();
        eprintln!("demo databases kept in {}", kept.display());
    }
    Ok(ExitCode::SUCCESS)
}

struct Report {
    text: String,
    json: serde_json::Value,
}

async fn engine(dir: &Path, wf: Workflow) -> anyhow::Result<Engine> {
    let file = dir.join(format!("{}.db", wf.name()));
    let backend = Arc::new(SqliteBackend::open(&file)?);
    let (engine, _) = Engine::open(wf, backend, EngineOptions::default()).await?;
    Ok(engine)
}

/// A run of `editor` and its children in `researcher`, one line each, with where each
/// stands.
async fn tree_text(editor: &Engine, researcher: &Engine, run: &str) -> anyhow::Result<String> {
    let parent = editor
        .stored_snapshot(run)
        .await?
        .context("the editor's run is gone")?;
    let mut out = format!(
        "EditorAgent run {} ({})\n",
        short(run),
        parent.run.progress().as_str()
    );
    let children = parent.children();
    for (i, c) in children.iter().enumerate() {
        let state = match researcher.stored_snapshot(&c.run_id).await? {
            Some(s) => s.run.progress().as_str(),
            None => "not started",
        };
        let _ = writeln!(
            out,
            "  {} child {}: {} run {} ({state}; {})",
            if i + 1 == children.len() {
                "└"
            } else {
                "├"
            },
            c.child,
            c.agent_class,
            short(&c.run_id),
            match c.state {
                "awaited" => "awaited by the parent",
                "ended" => "reported to the parent",
                "abandoned" => "abandoned by the parent",
                other => other,
            }
        );
    }
    Ok(out)
}

/// The last 8 characters of a run id (its first ones are the second it was made in, the
/// same for the demo's runs).
fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(8)..).unwrap_or(id)
}

/// Waits until `n` children of the editor's run `run` wait for a source; their run ids.
async fn wait_for_waiting_children(
    editor: &Engine,
    researcher: &Engine,
    run: &str,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    tokio::time::timeout(WAIT, async {
        loop {
            let waiting: Vec<String> = editor
                .children(run)?
                .into_iter()
                .filter(|c| {
                    researcher.snapshot(&c.run_id).is_some_and(|s| {
                        !s.events_of::<NeedsSource>().is_empty() && s.run.running().next().is_none()
                    })
                })
                .map(|c| c.run_id)
                .collect();
            if waiting.len() >= n {
                return Ok::<_, anyhow::Error>(waiting);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .context("the research agents did not reach their wait in time")?
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn counts_text(counts: &[(String, usize)]) -> String {
    counts
        .iter()
        .map(|(s, n)| format!("{s} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn finding_text(f: &Finding) -> String {
    let mut s = format!("{} {} [{}]", f.code, f.severity.as_str(), f.rule);
    if let Some(step) = &f.step {
        let _ = write!(s, " step `{step}`");
    }
    if let Some(p) = &f.param {
        let _ = write!(s, " param `{p}`");
    }
    let _ = write!(s, ": {}\n  why: {}\n  fix: {}", f.message, f.why, f.fix);
    s
}

async fn demo(dir: &Path) -> anyhow::Result<Report> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "saap demo — example agents on the embedded engine (SQLite, WAL, durable before dispatch)\n"
    );

    // 1. The retrieval agent.
    let wf = rag::workflow();
    let graph = saap::mermaid(wf.spec());
    let question = "How do I reset my password?";
    let runner = TestRunner::new(engine(dir, wf).await?);
    let run = runner.start(UserMessageEvent::new(question)).await?;
    let answer = run.wait_for_event::<Answered>(WAIT).await?;
    let snap = run.wait_for_end(WAIT).await?;
    let rag_counts = snap.execution_counts();
    let rag_timeline = snap.timeline();
    let _ = writeln!(
        out,
        "1. RagAgent — fan-out to three sources, fan-in with a fixed list, scripted model"
    );
    let _ = writeln!(out, "   question:   {question}");
    let _ = writeln!(out, "   answer:     {}", answer.text);
    let _ = writeln!(out, "   executions: {}", counts_text(&rag_counts));
    let _ = writeln!(
        out,
        "   timeline of run {} (decision records):",
        snap.run_id
    );
    out.push_str(&indent(&rag_timeline));
    let _ = writeln!(out, "   workflow graph (Mermaid):");
    out.push_str(&indent(&graph));
    out.push('\n');

    // 1b. The same retrieval answered by a model.
    let model_wf = rag_model::workflow();
    let runner = TestRunner::new(engine(dir, model_wf).await?);
    let run = runner.start(UserMessageEvent::new(question)).await?;
    let snap = run.wait_for_end(WAIT).await?;
    if snap.has_exception() {
        anyhow::bail!(
            "the model's answer failed (set OPENAI_BASE_URL to a reachable server, or unset it for the scripted model):\n{}",
            snap.timeline()
        );
    }
    let chunks: Vec<String> = snap
        .events_of::<ChunkEvent>()
        .into_iter()
        .map(|c| c.chunk)
        .collect();
    let call = snap.events_of::<LLMEvent>().into_iter().next();
    let cost = snap.events_of::<LLMCostEvent>().into_iter().next();
    let model_name = call
        .as_ref()
        .and_then(|c| c.chat_model_name.clone())
        .unwrap_or_default();
    let tokens = call.as_ref().map(|c| {
        (
            c.token_count_prompt.unwrap_or(0),
            c.token_count_completion.unwrap_or(0),
            c.token_count_total.unwrap_or(0),
        )
    });
    let usd = cost
        .as_ref()
        .map(|c| c.prompt_tokens_costs + c.completion_tokens_costs);
    let _ = writeln!(
        out,
        "1b. RagModelAgent — the same retrieval, answered by a model through saap::llm ({})",
        if std::env::var_os("OPENAI_BASE_URL").is_some_and(|v| !v.is_empty()) {
            "OPENAI_BASE_URL".to_string()
        } else {
            format!(
                "`{}`: a scripted model on a loopback OpenAI-compatible endpoint; set OPENAI_BASE_URL for a real one",
                rag_model::SCRIPTED_MODEL
            )
        }
    );
    let _ = writeln!(
        out,
        "   streamed:   {} chunks: {}",
        chunks.len(),
        chunks.join("|")
    );
    if let Some((p, c, t)) = tokens {
        let _ = writeln!(
            out,
            "   model call: {model_name}, tokens {p} prompt + {c} completion = {t} (LLMEvent)"
        );
    }
    match usd {
        Some(usd) => {
            let _ = writeln!(
                out,
                "   cost:       ${usd:.8} (LLMCostEvent, from the price table)"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "   cost:       not priced (no price for `{model_name}`)"
            );
        }
    }
    let _ = writeln!(
        out,
        "   executions: {}
",
        counts_text(&snap.execution_counts())
    );
    let model_json = json!({
        "model": model_name,
        "chunks": chunks,
        "answer": snap.events_of::<Answered>().into_iter().next().map(|a| a.text),
        "tokens": tokens.map(|(p, c, t)| json!({"prompt": p, "completion": c, "total": t})),
        "cost_usd": usd,
        "executions": snap.execution_counts(),
    });

    // 2. A human in the loop.
    let runner = TestRunner::new(engine(dir, approval::workflow()).await?);
    let run = runner
        .start(UserMessageEvent::new("refund order 17"))
        .await?;
    let req = run.wait_for_event::<ApprovalRequested>(WAIT).await?;
    let waiting = run.wait_idle(WAIT).await?.waiting_for();
    run.send(ApprovalGiven {
        approved: true,
        by: "ana".into(),
    })
    .await?;
    let done = run.wait_for_event::<Executed>(WAIT).await?;
    let _ = writeln!(
        out,
        "2. ApprovalAgent — request → wait for a human → response"
    );
    let _ = writeln!(out, "   agent asks:  {}", req.question);
    for (i, line) in waiting.lines().enumerate() {
        let label = if i == 0 { "run waits:" } else { "" };
        let _ = writeln!(out, "   {label:<12} {line}");
    }
    let _ = writeln!(
        out,
        "   human says yes (ApprovalGiven) → Executed `{}` approved by {}",
        done.action, done.approved_by
    );
    let _ = writeln!(
        out,
        "   carried out once, as a journaled effect (a re-run gets the ticket back): {}\n",
        done.ticket
    );

    // 2b. The same wait across a crash: the store is halted (as by kill -9) while the run
    // waits for the human, then reopened; the run resumes from its journal.
    let file = dir.join("ApprovalAgentCrash.db");
    let backend = Arc::new(SqliteBackend::open(&file)?);
    let (engine1, _) =
        Engine::open(approval::workflow(), backend, EngineOptions::default()).await?;
    let crash_run = TestRunner::new(engine1.clone())
        .start(UserMessageEvent::new("close account 42"))
        .await?;
    crash_run.wait_for_event::<ApprovalRequested>(WAIT).await?;
    crash_run.wait_idle(WAIT).await?;
    let crash_id = crash_run.run_id().to_string();
    engine1.halt();
    drop(crash_run);
    drop(engine1);
    let backend = Arc::new(SqliteBackend::open(&file)?);
    let (engine2, recovery) =
        Engine::open(approval::workflow(), backend, EngineOptions::default()).await?;
    let resumed = TestRunner::new(engine2).attach(&crash_id)?;
    resumed
        .send(ApprovalGiven {
            approved: true,
            by: "ana".into(),
        })
        .await?;
    let after = resumed.wait_for_event::<Executed>(WAIT).await?;
    let _ = writeln!(
        out,
        "   crash while waiting (store halted, as by kill -9), then reopen:"
    );
    let _ = writeln!(
        out,
        "   resumed {} live run(s), re-ran {} unfinished execution(s); the human approves → Executed `{}`\n",
        recovery.resumed_runs, recovery.retried_executions, after.action
    );

    // 2c. The same agent with a deadline nobody meets: the engine delivers the timeout the
    // request set (a durable timer), and the run ends as Expired.
    let deadline = Duration::from_millis(300);
    let backend = Arc::new(SqliteBackend::open(dir.join("ApprovalAgentDeadline.db"))?);
    let wf = approval::workflow_with_deadline(deadline);
    let (engine3, _) = Engine::open(wf, backend, EngineOptions::default()).await?;
    let late = TestRunner::new(engine3)
        .start(UserMessageEvent::new("wipe the cache"))
        .await?;
    let expired = late.wait_for_event::<Expired>(WAIT).await?;
    let fired = late
        .timeline()
        .lines()
        .find(|l| l.contains("timer 0 fired"))
        .map(|l| l.trim().to_string())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "   with a deadline of {} ms and no answer: {fired} → Expired `{}`\n",
        deadline.as_millis(),
        expired.action
    );

    // 2d. Delegation: an editor asks a researcher about two topics (two child runs on the
    // same store, awaited together); one topic waits for a human's source. Then a second
    // editor run is cancelled while both its children wait: the cancel covers the tree.
    let backend = Arc::new(SqliteBackend::open(dir.join("ResearchAgents.db"))?);
    let (editor, researcher) = research::agents(backend, EngineOptions::default()).await;
    let topics = "ants, moths";
    let run = editor.start_run(UserMessageEvent::new(topics)).await?;
    let waiting_child = wait_for_waiting_children(&editor, &researcher, &run, 1).await?;
    let tree_waiting = tree_text(&editor, &researcher, &run).await?;
    researcher
        .send(
            &waiting_child[0],
            SourceGiven {
                source: "the field guide".into(),
            },
        )
        .await?;
    tokio::time::timeout(WAIT, editor.wait_for_end(&run)).await??;
    let brief = editor
        .snapshot(&run)
        .and_then(|s| s.events_of::<Brief>().into_iter().next())
        .map(|b| b.text)
        .unwrap_or_default();
    let tree_done = tree_text(&editor, &researcher, &run).await?;
    let cancelled_run = editor
        .start_run(UserMessageEvent::new("moths, wasps"))
        .await?;
    wait_for_waiting_children(&editor, &researcher, &cancelled_run, 2).await?;
    editor
        .cancel(&cancelled_run, "the issue was pulled")
        .await?;
    for c in editor.children(&cancelled_run)? {
        tokio::time::timeout(WAIT, researcher.wait_for_end(&c.run_id)).await??;
    }
    let tree_cancelled = tree_text(&editor, &researcher, &cancelled_run).await?;
    let _ = writeln!(
        out,
        "2d. EditorAgent delegating to ResearcherAgent — two child runs, awaited together"
    );
    let _ = writeln!(out, "   editor asks about: {topics}");
    let _ = write!(
        out,
        "   while a human is asked for a source:
{}",
        indent(&tree_waiting)
    );
    let _ = write!(
        out,
        "   the human gives it → Brief `{brief}`
{}",
        indent(&tree_done)
    );
    let _ = write!(
        out,
        "   a second editor run (moths, wasps), cancelled while both children wait:
{}
",
        indent(&tree_cancelled)
    );

    // 3. A broken agent, its symptom and its fix.
    let mut broken_json = Vec::new();
    let _ = writeln!(out, "3. A broken agent: the optional-parameter trap");
    // Findings both variants share (the review is closed from outside, so neither step
    // returns a stop event) are listed by code only; the ones that differ are the diagnosis.
    let codes = |wf: &Workflow| -> Vec<&'static str> {
        check(wf.compiled()).iter().map(|f| f.code).collect()
    };
    let fixed_codes = codes(&broken::optional_trap_fixed());
    for (label, wf) in [
        ("broken", broken::optional_trap()),
        ("fixed", broken::optional_trap_fixed()),
    ] {
        let name = wf.name().to_string();
        let findings = check(wf.compiled());
        let runner = TestRunner::new(engine(dir, wf).await?);
        let run = runner.start(UserMessageEvent::new("release notes")).await?;
        run.wait_idle(WAIT).await?;
        run.send(ReviewNotes {
            notes: "fix the typo".into(),
        })
        .await?;
        run.wait_idle(WAIT).await?;
        run.send(ReviewClosed {}).await?;
        let snap = run.wait_for_end(WAIT).await?;
        let published: Vec<String> = snap
            .events_of::<Published>()
            .into_iter()
            .map(|p| p.text)
            .collect();
        let _ = writeln!(out, "   {label}: {name}");
        let _ = writeln!(out, "   saap check: {} finding(s)", findings.len());
        let mut shared = Vec::new();
        for f in &findings {
            if label == "broken" && !fixed_codes.contains(&f.code) {
                out.push_str(&indent(&finding_text(f)));
            } else {
                shared.push(format!("{} [{}]", f.code, f.rule));
            }
        }
        if !shared.is_empty() {
            let _ = writeln!(out, "    also (in both variants): {}", shared.join(", "));
        }
        let _ = writeln!(
            out,
            "   run: publish executed {} time(s){}",
            snap.executions_of("publish"),
            if snap.executions_of("publish") > 1 {
                "  ← the symptom"
            } else {
                ""
            }
        );
        for p in &published {
            let _ = writeln!(out, "     published: {p}");
        }
        broken_json.push(json!({
            "variant": label,
            "workflow": name,
            "findings": findings,
            "executions": snap.execution_counts(),
            "published": published,
        }));
    }
    let _ = writeln!(
        out,
        "\nNext: `saap check examples/specs/optional-trap.yaml`, `saap explore examples/specs/list-reruns.yaml`."
    );

    let json = json!({
        "rag": {
            "question": question,
            "answer": answer.text,
            "executions": rag_counts,
            "timeline": rag_timeline.lines().collect::<Vec<_>>(),
            "mermaid": graph,
        },
        "rag_model": model_json,
        "approval": {
            "question": req.question,
            "waiting_for": waiting,
            "result": { "action": done.action, "approved_by": done.approved_by },
            "after_crash": {
                "resumed_runs": recovery.resumed_runs,
                "retried_executions": recovery.retried_executions,
                "result": after.action,
            },
        },
        "delegation": {
            "topics": topics,
            "brief": brief,
            "tree_while_waiting": tree_waiting.lines().collect::<Vec<_>>(),
            "tree": tree_done.lines().collect::<Vec<_>>(),
            "tree_after_cancel": tree_cancelled.lines().collect::<Vec<_>>(),
        },
        "optional_trap": broken_json,
    });
    Ok(Report { text: out, json })
}
