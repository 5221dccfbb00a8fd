//! A run's page: where it stands and what it waits for, the actions a live or ended run
//! offers, the graph with its path, a waterfall of executions (attempts, durations, bound
//! inputs, outputs, errors, model tokens and cost), the events with their payloads (paged),
//! child runs, timers, journaled effects, `explain` for every step, and the decision
//! records. Rendered from a rebuilt run ([`StoredRunView`]); must not read the store.

use super::graph::{RunPath, svg};
use super::html::{badge, duration, esc, json_block};
use super::run_facts::{RunFacts, Usage};
use super::state::Offers;
use crate::backend::{EffectOutcome, EffectRecord, StoredRun};
use crate::history::{StoredRunView, utc_time};
use saap_dispatch::render::EventLabels;
use saap_dispatch::run::{Bound, ExecState, RunStatus, TimerState};
use saap_dispatch::spec::WorkflowSpec;
use saap_dispatch::{ExecutionId, Origin};
use std::fmt::Write as _;

/// Events listed per page of a run's page.
pub(super) const EVENTS_PER_PAGE: usize = 500;
/// Executions listed per page.
pub(super) const EXECUTIONS_PER_PAGE: usize = 500;
/// Bytes of one payload shown inline (the whole is at `/api/runs/RUN`).
const PAYLOAD_LIMIT: usize = 4096;
/// Lines of the decision records shown, and firings per step in `explain`: a long run's
/// page stays readable and fast; the whole is in `show RUN` and `/api/runs/RUN`.
const RECORD_LINES: usize = 2000;
const FIRINGS_SHOWN: usize = 200;

pub(super) struct RunPage<'a> {
    pub(super) view: &'a StoredRunView,
    pub(super) stored: &'a StoredRun,
    pub(super) effects: &'a [EffectRecord],
    /// The run's agent's spec (a child run's agent may be another than the studio's).
    pub(super) spec: &'a WorkflowSpec,
    /// The actions offered, and why one is not.
    pub(super) offers: Offers,
    /// The first event and execution listed (paging).
    pub(super) events_from: usize,
    pub(super) executions_from: usize,
    /// A line about the action just done (after a redirect).
    pub(super) notice: Option<String>,
}

/// The page's body.
pub(super) fn render(p: &RunPage<'_>) -> String {
    let view = p.view;
    let run = &view.run;
    let facts = RunFacts::of(view, p.stored);
    let progress = run.progress();
    let mut out = String::with_capacity(64 * 1024);
    let live = !run.is_terminated();
    let _ = write!(
        out,
        "<section id=\"run\" data-run=\"{id}\" data-live=\"{live}\" data-entries=\"{entries}\">\
         <h1>run <code>{id}</code> {badge}</h1><p class=\"meta\">agent <b>{wf}</b> · thread \
         <a href=\"/?agent={wf_q}&amp;thread={thread_q}\"><code>{thread}</code></a>{started} · {events} events · \
         {xs} executions · {span}{parent}</p>",
        id = esc(&view.run_id),
        badge = badge(progress.as_str()),
        wf = esc(&view.workflow),
        thread = esc(&view.thread_id),
        thread_q = super::html::query_value(&view.thread_id),
        wf_q = super::html::query_value(&view.workflow),
        started = view
            .started_unix()
            .map(|s| format!(" · started {} UTC", utc_time(s)))
            .unwrap_or_default(),
        events = run.log().len(),
        xs = run.executions().len(),
        entries = p.stored.journal.len(),
        span = duration(facts.span_ns()),
        parent = p
            .stored
            .meta
            .parent
            .as_ref()
            .map(|par| format!(
                " · delegated by <a href=\"/runs/{r}\">{a} run <code>{r}</code></a>",
                r = esc(&par.run_id),
                a = esc(&par.agent_class)
            ))
            .unwrap_or_default(),
    );
    if let Some(n) = &p.notice {
        let _ = write!(out, "<p class=\"notice\" role=\"status\">{}</p>", esc(n));
    }
    if let Some(origin) = super::super::fork::lineage(p.stored) {
        let list = |xs: &[String]| {
            let links: Vec<String> = xs
                .iter()
                .map(|x| format!("<a href=\"#{x}\">{x}</a>"))
                .collect();
            if links.is_empty() {
                "none".to_string()
            } else {
                links.join(" ")
            }
        };
        let _ = write!(
            out,
            "<p class=\"lineage\">forked from run <a href=\"/runs/{r}\"><code>{r}</code></a> at \
             event [{at}]: executions reused from it (not run again): {reused}; run live: {live_xs}</p>",
            r = esc(&origin.run_id),
            at = origin.at,
            reused = list(&origin.reused),
            live_xs = list(&origin.live),
        );
    }
    match view.result() {
        Some((name, fields)) => {
            let _ = write!(
                out,
                "<div class=\"result\"><h2>Result: {}</h2>{}</div>",
                esc(&name),
                json_block(&fields, PAYLOAD_LIMIT)
            );
        }
        None => {
            let waits = crate::snapshot::waiting_for(run, None)
                + &crate::process::open_work_requests_text(&crate::process::open_work_requests(
                    run,
                    |seq| Some(view.fields(seq)),
                ));
            let _ = write!(
                out,
                "<div class=\"waits\"><h2>Where it stands</h2><pre>{}</pre></div>",
                esc(waits.trim_end())
            );
        }
    }
    out.push_str(&actions(p, live));
    let _ = write!(
        out,
        "<h2>Graph</h2><div class=\"graph-box\">{}</div>",
        svg(p.spec, Some(&run_path(view)))
    );
    out.push_str(&executions(p, &facts));
    out.push_str(&events(p, &facts));
    out.push_str(&children(view));
    out.push_str(&timers(view));
    out.push_str(&effects(p.effects));
    out.push_str(&explain(view));
    out.push_str(&records(view));
    out.push_str("</section>");
    out
}

fn run_path(view: &StoredRunView) -> RunPath {
    let run = &view.run;
    let mut path = RunPath::default();
    for x in run.executions() {
        let name = run.spec().steps[x.step as usize].name.clone();
        if x.state == ExecState::Running {
            path.running.insert(name.clone());
        }
        *path.executions.entry(name).or_default() += 1;
    }
    for e in run.log() {
        path.events.insert(run.type_name(e.ty).to_string());
    }
    path
}

/// The forms of the run's actions: send and cancel while live; replay always. Forking is
/// offered on each event from outside (in the events table). An action this studio cannot
/// do is shown disabled, with why.
fn actions(p: &RunPage<'_>, live: bool) -> String {
    let id = esc(&p.view.run_id);
    let o = &p.offers;
    let disabled = |why: Option<&str>| {
        if o.signed_in && why.is_none() {
            ""
        } else {
            " disabled"
        }
    };
    let mut out = String::from("<div class=\"actions\"><h2>Actions</h2>");
    let mut reasons: Vec<&str> = [o.send, o.fork, o.replay].into_iter().flatten().collect();
    reasons.dedup();
    for why in &reasons {
        let _ = write!(out, "<p class=\"hint cannot\">{}</p>", esc(why));
    }
    if !o.signed_in && o.send.is_none() {
        out.push_str(
            "<p class=\"hint\">Actions need the studio's token: open the link the studio printed \
             (<code>…/?token=…</code>), or paste the token on <a href=\"/login\">the sign-in page</a>.</p>",
        );
    }
    if live {
        // The types the run has not had yet first: what a waiting run waits for, usually.
        let run = &p.view.run;
        let seen: std::collections::HashSet<&str> =
            run.log().iter().map(|e| run.type_name(e.ty)).collect();
        let mut inputs = outside_types(p.spec);
        inputs.sort_by_key(|t| seen.contains(t.as_str()));
        let first = inputs.first().map(String::as_str).unwrap_or("StartEvent");
        let options: String = inputs
            .iter()
            .map(|t| format!("<option>{}</option>", esc(t)))
            .collect();
        let _ = write!(
            out,
            "<form class=\"send\" method=\"post\" action=\"/runs/{id}/send\">\
             <label>Send an event (a person's answer, say) <select class=\"event-type\" \
             aria-label=\"event type\">{options}</select></label>\
             <textarea name=\"event\" rows=\"4\" spellcheck=\"false\" aria-label=\"event JSON\">\
             {{\"_event_name\": \"{first}\"}}</textarea>\
             <button type=\"submit\"{disabled}>Send</button></form>\
             <form class=\"cancel\" method=\"post\" action=\"/runs/{id}/cancel\">\
             <input name=\"reason\" placeholder=\"why (kept on the run)\" aria-label=\"reason\">\
             <button type=\"submit\" class=\"danger\"{disabled}>Cancel the run</button></form>",
            first = esc(first),
            disabled = disabled(o.send),
        );
    }
    let _ = write!(
        out,
        "<form class=\"replay\" method=\"post\" action=\"/runs/{id}/replay\">\
         <button type=\"submit\"{disabled}>Replay</button> <span class=\"hint\">re-runs its step \
         bodies with this binary's code against the record (no model or tool is called) and says \
         whether it reproduced</span></form></div>",
        disabled = disabled(o.replay),
    );
    out
}

/// The types a run can be sent from outside: those its steps take and no step returns.
fn outside_types(spec: &WorkflowSpec) -> Vec<String> {
    let returned: std::collections::HashSet<&str> = spec
        .steps
        .iter()
        .flat_map(|s| s.outputs.iter().map(String::as_str))
        .collect();
    let mut types: Vec<String> = Vec::new();
    for s in &spec.steps {
        for p in &s.params {
            for t in &p.types {
                if !returned.contains(t.as_str()) && !types.contains(t) {
                    types.push(t.clone());
                }
            }
        }
    }
    types
}

fn executions(p: &RunPage<'_>, facts: &RunFacts) -> String {
    let view = p.view;
    let run = &view.run;
    let total = run.executions().len();
    let mut out = format!("<h2>Executions ({total})</h2>");
    if total == 0 {
        out.push_str("<p class=\"empty\">No step has run.</p>");
        return out;
    }
    out.push_str(&pager(
        "xs",
        p.executions_from,
        EXECUTIONS_PER_PAGE,
        total,
        &view.run_id,
        p.events_from,
    ));
    let span = facts.span_ns().max(1) as f64;
    let mut per_step: Vec<(String, Usage)> = Vec::new();
    out.push_str(
        "<table class=\"waterfall\"><thead><tr><th>execution</th><th>step</th><th>state</th>\
         <th>inputs</th><th>outputs</th><th>time</th><th class=\"bar-col\">waterfall</th>\
         <th>model</th></tr></thead><tbody>",
    );
    for (i, x) in run
        .executions()
        .iter()
        .enumerate()
        .skip(p.executions_from)
        .take(EXECUTIONS_PER_PAGE)
    {
        let id = ExecutionId(i as u32);
        let step = &run.spec().steps[x.step as usize];
        let state = match x.state {
            ExecState::Running if run.is_held(id) => "held".to_string(),
            s => format!("{s:?}").to_lowercase(),
        };
        let mut inputs = Vec::new();
        for (pi, b) in run.bindings(id).iter().enumerate() {
            let seqs = match *b {
                Bound::Nothing => &[][..],
                _ => run.bound_seqs(x.step, pi as u32, *b),
            };
            let list: Vec<String> = seqs.iter().map(|&s| event_link(view, s)).collect();
            inputs.push(format!(
                "{}={}",
                esc(&step.params[pi].name),
                if list.is_empty() {
                    "—".to_string()
                } else {
                    list.join(" ")
                }
            ));
        }
        let outputs = outputs_text(view, facts, id);
        let attempts = &facts.attempts[i];
        let mut time = String::new();
        let mut bars = String::new();
        for a in attempts {
            let end = a.end_ns.unwrap_or(facts.last_ns);
            let took = end.saturating_sub(a.start_ns);
            let left = a.start_ns.saturating_sub(facts.start_ns) as f64 / span * 100.0;
            let width = (took as f64 / span * 100.0).max(0.4);
            let _ = write!(
                time,
                "{}{}{}",
                if time.is_empty() { "" } else { "<br>" },
                if attempts.len() > 1 {
                    format!("attempt {}: ", a.attempt)
                } else {
                    String::new()
                },
                if a.end_ns.is_some() {
                    duration(took)
                } else {
                    format!("{} so far", duration(took))
                }
            );
            let _ = write!(
                bars,
                "<div class=\"bar{}\" style=\"margin-left:{left:.2}%;width:{width:.2}%\" title=\"starts +{}\"></div>",
                if a.end_ns.is_none() { " open" } else { "" },
                duration(a.start_ns.saturating_sub(facts.start_ns))
            );
        }
        let usage = facts.usage.get(&id);
        if let Some(u) = usage {
            match per_step.iter_mut().find(|(n, _)| *n == step.name) {
                Some((_, total)) => total.add(u),
                None => per_step.push((step.name.clone(), u.clone())),
            }
        }
        let error = run
            .execution_error(id)
            .map(|e| format!("<div class=\"error\">{}</div>", esc(e)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr id=\"{id}\" class=\"x {state}\" data-step=\"{step}\"><td><code>{id}</code></td>\
             <td>{step}</td><td>{state}{retry}</td><td class=\"io\">{inputs}</td><td class=\"io\">{outputs}{error}</td>\
             <td class=\"num\">{time}</td><td class=\"bar-col\">{bars}</td><td class=\"num\">{model}</td></tr>",
            step = esc(&step.name),
            retry = if x.attempt > 1 {
                format!(" (attempt {})", x.attempt)
            } else {
                String::new()
            },
            inputs = inputs.join("<br>"),
            model = usage.map(usage_text).unwrap_or_default(),
        );
    }
    out.push_str("</tbody></table>");
    if !per_step.is_empty() {
        out.push_str(
            "<table class=\"usage\"><caption>Model calls per step</caption><thead><tr><th>step</th>\
             <th>calls</th><th>prompt tokens</th><th>completion tokens</th><th>cost</th></tr></thead><tbody>",
        );
        for (name, u) in &per_step {
            let _ = write!(
                out,
                "<tr data-step=\"{n}\"><td>{n}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{:.6}</td></tr>",
                u.calls,
                u.prompt_tokens,
                u.completion_tokens,
                u.cost,
                n = esc(name)
            );
        }
        out.push_str("</tbody></table>");
    }
    out
}

/// What an execution returned or showed, in order, a run of one type as one link: `[8]
/// ChunkEvent ×15` (a streamed answer is one line, not fifteen).
fn outputs_text(view: &StoredRunView, facts: &RunFacts, x: ExecutionId) -> String {
    let run = &view.run;
    let seqs: Vec<u32> = facts
        .event_by
        .iter()
        .enumerate()
        .filter(|(_, by)| **by == Some(x))
        .map(|(s, _)| s as u32)
        .collect();
    if seqs.is_empty() {
        return "—".to_string();
    }
    let ty = |s: u32| run.log().get(s as usize).map(|e| e.ty);
    let mut parts = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i + 1;
        while j < seqs.len() && ty(seqs[j]) == ty(seqs[i]) {
            j += 1;
        }
        let mut part = event_link(view, seqs[i]);
        if j - i > 1 {
            let _ = write!(
                part,
                " ×{} (to <a href=\"#e{l}\">[{l}]</a>)",
                j - i,
                l = seqs[j - 1]
            );
        }
        parts.push(part);
        i = j;
    }
    parts.join("<br>")
}

fn usage_text(u: &Usage) -> String {
    let mut t = format!(
        "{} call{}, {} + {} tokens",
        u.calls,
        if u.calls == 1 { "" } else { "s" },
        u.prompt_tokens,
        u.completion_tokens
    );
    if u.cost > 0.0 {
        let _ = write!(t, ", cost {:.6}", u.cost);
    }
    t
}

/// `[seq] Type` linking to the event's row.
fn event_link(view: &StoredRunView, seq: u32) -> String {
    let name = view
        .run
        .log()
        .get(seq as usize)
        .map_or("?", |e| view.run.type_name(e.ty));
    format!("<a href=\"#e{seq}\">[{seq}] {}</a>", esc(name))
}

fn events(p: &RunPage<'_>, facts: &RunFacts) -> String {
    let view = p.view;
    let run = &view.run;
    let total = run.log().len();
    let mut out = format!("<h2>Events ({total})</h2>");
    out.push_str(&pager(
        "events",
        p.events_from,
        EVENTS_PER_PAGE,
        total,
        &view.run_id,
        p.executions_from,
    ));
    let ended_at = match run.status() {
        RunStatus::Terminated { by } => Some(by),
        _ => None,
    };
    out.push_str(
        "<table class=\"events\"><thead><tr><th>#</th><th>at</th><th>event</th><th>kind</th>\
         <th>from</th><th>payload</th></tr></thead><tbody>",
    );
    let disabled = if p.offers.signed_in { "" } else { " disabled" };
    for (seq, e) in run
        .log()
        .iter()
        .enumerate()
        .skip(p.events_from)
        .take(EVENTS_PER_PAGE)
    {
        let name = run.type_name(e.ty);
        let from = match facts.event_by[seq] {
            Some(x) => {
                let step = run
                    .execution(x)
                    .map_or("?", |e| run.spec().steps[e.step as usize].name.as_str());
                format!("<a href=\"#{x}\">{} {x}</a>", esc(step))
            }
            None => "outside".to_string(),
        };
        let after_stop = ended_at.is_some_and(|by| seq as u32 > by);
        let fields = view.fields(seq as u32);
        // Forking starts a new run at an event from outside before the end.
        let forkable = p.offers.fork.is_none()
            && seq > 0
            && e.origin == Origin::Outside
            && facts.event_by[seq].is_none()
            && ended_at.is_none_or(|by| (seq as u32) < by);
        let fork = if forkable {
            format!(
                "<details class=\"fork\"><summary>fork here</summary>\
                 <form method=\"post\" action=\"/runs/{id}/fork\"><input type=\"hidden\" name=\"at\" value=\"{seq}\">\
                 <label><input type=\"radio\" name=\"mode\" value=\"same\" checked> send [{seq}] again</label> \
                 <label><input type=\"radio\" name=\"mode\" value=\"replace\"> replace it with</label> \
                 <label><input type=\"radio\" name=\"mode\" value=\"add\"> send this first</label>\
                 <textarea name=\"event\" rows=\"3\" spellcheck=\"false\" aria-label=\"event JSON\">{json}</textarea>\
                 <label><input type=\"checkbox\" name=\"no_reapply\" value=\"1\"> leave out the later events from outside</label>\
                 <label><input type=\"checkbox\" name=\"no_reuse\" value=\"1\"> run every later step live (not the original's outputs)</label>\
                 <button type=\"submit\"{disabled}>Fork</button></form></details>",
                id = esc(&view.run_id),
                json = esc(&event_json(name, &fields)),
            )
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "<tr id=\"e{seq}\" class=\"ev{after}\" data-event=\"{n}\"><td class=\"num\">{seq}</td>\
             <td class=\"num\">+{at}</td><td>{n}{after_note}</td><td>{kind}</td><td>{from}</td>\
             <td><details><summary>{summary}</summary>{payload}</details>{fork}</td></tr>",
            after = if after_stop { " after-stop" } else { "" },
            n = esc(name),
            at = duration(facts.event_ns[seq].saturating_sub(facts.start_ns)),
            after_note = if after_stop {
                " <span class=\"hint\">(after the end: evidence, not dispatched)</span>"
            } else {
                ""
            },
            kind = e.kind.label(),
            summary = esc(&summary(&fields)),
            payload = json_block(&fields, PAYLOAD_LIMIT),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// An event as the JSON `send` takes: `{"_event_name": …, …fields}`.
fn event_json(name: &str, fields: &serde_json::Value) -> String {
    let mut map = serde_json::Map::new();
    map.insert("_event_name".into(), serde_json::Value::from(name));
    if let Some(f) = fields.as_object() {
        for (k, v) in f {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    serde_json::to_string(&serde_json::Value::Object(map)).unwrap_or_default()
}

/// A payload in one short line (the first fields).
fn summary(fields: &serde_json::Value) -> String {
    let text = match fields {
        serde_json::Value::Object(m) if m.is_empty() => "{}".to_string(),
        serde_json::Value::Null => "—".to_string(),
        v => v.to_string(),
    };
    if text.chars().count() > 80 {
        text.chars().take(79).chain(['…']).collect()
    } else {
        text
    }
}

/// Links to the previous and next pages of a table when it has more than one.
fn pager(
    what: &str,
    from: usize,
    per: usize,
    total: usize,
    run_id: &str,
    other_from: usize,
) -> String {
    if total <= per {
        return String::new();
    }
    let (this_key, other_key) = if what == "events" {
        ("events", "xs")
    } else {
        ("xs", "events")
    };
    let link = |start: usize, text: &str| {
        format!(
            "<a href=\"/runs/{}?{this_key}={start}&amp;{other_key}={other_from}\">{text}</a>",
            esc(run_id)
        )
    };
    let mut out = format!(
        "<p class=\"pager\">{}–{} of {total} ",
        from.min(total),
        (from + per).min(total)
    );
    if from > 0 {
        out.push_str(&link(from.saturating_sub(per), "← earlier"));
        out.push(' ');
    }
    if from + per < total {
        out.push_str(&link(from + per, "later →"));
    }
    out.push_str("</p>");
    out
}

fn children(view: &StoredRunView) -> String {
    let kids = view.children();
    if kids.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<h2>Child runs ({})</h2><table class=\"children\"><thead><tr><th>#</th><th>agent</th>\
         <th>run</th><th>state</th><th>requested by</th></tr></thead><tbody>",
        kids.len()
    );
    for c in kids {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td><a href=\"/runs/{r}\"><code>{r}</code></a></td><td>{}{}</td>\
             <td><a href=\"#{x}\">{x}</a></td></tr>",
            c.child,
            esc(&c.agent_class),
            badge(c.state),
            c.unmet_obligation
                .map(|k| format!(" <span class=\"error\">unmet obligation: {k}</span>"))
                .unwrap_or_default(),
            r = esc(&c.run_id),
            x = esc(&c.requested_by),
        );
    }
    out.push_str("</tbody></table>");
    out
}

fn timers(view: &StoredRunView) -> String {
    let run = &view.run;
    let timers = run.timers();
    if timers.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<h2>Timers ({})</h2><table class=\"timers\"><thead><tr><th>#</th><th>event</th>\
         <th>due (UTC)</th><th>set by</th><th>state</th></tr></thead><tbody>",
        timers.len()
    );
    for (i, t) in timers.iter().enumerate() {
        let name = match &t.ty {
            saap_dispatch::NewEventType::Known(ty) => run.spec().types[*ty as usize].name.clone(),
            saap_dispatch::NewEventType::Foreign { name, .. } => name.clone(),
        };
        let state = match t.state {
            TimerState::Pending => "pending".to_string(),
            TimerState::Fired { seq: Some(s) } => format!("fired: <a href=\"#e{s}\">[{s}]</a>"),
            TimerState::Fired { seq: None } => "fired (a duplicate)".to_string(),
            TimerState::Dropped => "dropped: the run ended first".to_string(),
        };
        let _ = write!(
            out,
            "<tr><td>{i}</td><td>{}{}</td><td>{}</td><td><a href=\"#{x}\">{x}</a></td><td>{state}</td></tr>",
            esc(&name),
            t.for_child
                .map(|c| format!(" (deadline of child {c})"))
                .unwrap_or_default(),
            esc(&saap_dispatch::render::utc_text(t.due_ns)),
            x = t.set_by,
        );
    }
    out.push_str("</tbody></table>");
    out
}

fn effects(effects: &[EffectRecord]) -> String {
    if effects.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<h2>Outside calls ({})</h2><table class=\"effects\"><thead><tr><th>#</th><th>call</th>\
         <th>execution</th><th>took</th><th>result</th></tr></thead><tbody>",
        effects.len()
    );
    for e in effects {
        let (status, value) = match &e.outcome {
            EffectOutcome::Ok(v) => ("ok", v.clone()),
            EffectOutcome::Failed(m) => ("failed", serde_json::Value::from(m.as_str())),
        };
        let x = ExecutionId(e.execution);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td><a href=\"#{x}\">{x}</a> (attempt {})</td><td class=\"num\">{}</td>\
             <td><details><summary>{status}</summary><h4>input</h4>{}<h4>result</h4>{}</details></td></tr>",
            e.seq,
            esc(&e.name),
            e.attempt,
            duration(e.took_ns),
            json_block(&e.input, PAYLOAD_LIMIT),
            json_block(&value, PAYLOAD_LIMIT),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// `explain` for every step: why it ran each time, why it did not, what it still lacks.
fn explain(view: &StoredRunView) -> String {
    let run = &view.run;
    let labels = EventLabels::for_run(run, &[]);
    let mut out = String::from("<h2>Explain</h2><div class=\"explain\">");
    for (i, s) in run.spec().steps.iter().enumerate() {
        let e = saap_dispatch::explain::explain_step(run, &labels, i as u32);
        let _ = write!(
            out,
            "<details data-step=\"{n}\"><summary><b>{n}</b>: {}</summary>",
            esc(&e.summary),
            n = esc(&s.name)
        );
        if !e.fired.is_empty() {
            out.push_str("<h4>ran</h4><ul>");
            for f in e.fired.iter().take(FIRINGS_SHOWN) {
                let _ = write!(
                    out,
                    "<li><a href=\"#{x}\">{x}</a> on {} (from {}): {}{}{}</li>",
                    esc(&f.trigger),
                    esc(&f.trigger_from),
                    esc(&f.bindings.join(", ")),
                    match f.precondition {
                        Some(true) => " · precondition held",
                        _ => "",
                    },
                    if f.new_because.is_empty() {
                        String::new()
                    } else {
                        format!(" · new because {}", esc(&f.new_because.join("; ")))
                    },
                    x = esc(&f.execution),
                );
            }
            if e.fired.len() > FIRINGS_SHOWN {
                let _ = write!(
                    out,
                    "<li>… and {} more (all of them: <code>explain</code> on the run's history, from <code>show RUN --history-out</code>)</li>",
                    e.fired.len() - FIRINGS_SHOWN
                );
            }
            out.push_str("</ul>");
        }
        if !e.skipped.is_empty() {
            out.push_str("<h4>did not run</h4><ul>");
            for sk in e.skipped.iter().take(200) {
                let _ = write!(out, "<li>on {}: {}</li>", esc(&sk.trigger), esc(&sk.reason));
            }
            if e.skipped.len() > 200 {
                let _ = write!(out, "<li>… and {} more</li>", e.skipped.len() - 200);
            }
            out.push_str("</ul>");
        }
        if !e.still_missing.is_empty() {
            let _ = write!(
                out,
                "<p>still missing: {}</p>",
                esc(&e.still_missing.join(", "))
            );
        }
        for a in &e.advice {
            let _ = write!(out, "<p class=\"advice\">{}</p>", esc(a));
        }
        out.push_str("</details>");
    }
    out.push_str("</div>");
    out
}

/// The decision records as `show` prints them, the first [`RECORD_LINES`] lines.
fn records(view: &StoredRunView) -> String {
    let run = &view.run;
    let text = crate::snapshot::timeline_with(run, &view.display_by);
    let lines = text.lines().count();
    let shown: String = text
        .lines()
        .take(RECORD_LINES)
        .flat_map(|l| [l, "\n"])
        .collect();
    let more = if lines > RECORD_LINES {
        format!(
            "\n… {} more lines: the whole timeline is in `show {}` and /api/runs/{}",
            lines - RECORD_LINES,
            view.run_id,
            view.run_id
        )
    } else {
        String::new()
    };
    format!(
        "<details class=\"records\"><summary>Decision records ({})</summary><pre>{}{}</pre></details>",
        run.records().len(),
        esc(&shown),
        esc(&more)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_for_a_form_names_its_type_first_and_keeps_its_fields() {
        let j = event_json("Answer", &serde_json::json!({"n": 3, "_event_name": "x"}));
        assert_eq!(j, "{\"_event_name\":\"Answer\",\"n\":3}");
    }

    #[test]
    fn pages_link_back_and_on_only_where_there_is_more() {
        assert_eq!(pager("events", 0, 500, 400, "r", 0), "");
        let first = pager("events", 0, 500, 1200, "r", 0);
        assert!(
            first.contains("later →") && !first.contains("earlier"),
            "{first}"
        );
        let mid = pager("events", 500, 500, 1200, "r", 0);
        assert!(
            mid.contains("events=0&amp;xs=0") && mid.contains("events=1000"),
            "{mid}"
        );
    }
}
