//! The workflow's graph as an SVG drawn on the server: event types (rounded) feed the steps
//! that take them (boxes), steps feed the types they return; with a run, the path it took is
//! drawn on it (the steps that ran, with how often, the events that occurred, the edges
//! between them, the steps running now). Layered left to right by distance from the events
//! no step returns (the run's ways in); a cycle's edge back is drawn as an arc below.
//! Must not read the store: the run's facts are passed in.

use super::html::esc;
use saap_dispatch::spec::{ParamKind, WorkflowSpec};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// What a run did, by name, to draw on the graph.
#[derive(Default)]
pub(super) struct RunPath {
    /// Executions per step.
    pub(super) executions: HashMap<String, usize>,
    /// Steps with an execution running now.
    pub(super) running: HashSet<String>,
    /// Event types that occurred in the run's log.
    pub(super) events: HashSet<String>,
}

const COL: i64 = 200;
const ROW: i64 = 58;
const W: i64 = 164;
const H: i64 = 34;
const PAD: i64 = 24;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Node<'a> {
    Event(&'a str),
    Step(&'a str),
}

struct Edge<'a> {
    from: Node<'a>,
    to: Node<'a>,
    label: Option<String>,
    dashed: bool,
}

/// The graph as an `<svg>` element; `path` draws a run on it.
pub(super) fn svg(spec: &WorkflowSpec, path: Option<&RunPath>) -> String {
    let (nodes, edges) = nodes_and_edges(spec);
    if nodes.is_empty() {
        return "<p class=\"empty\">This workflow has no steps.</p>".to_string();
    }
    let place = layout(&nodes, &edges);
    let width = place.values().map(|p| p.0).max().unwrap_or(0) + W + 2 * PAD;
    let height = place.values().map(|p| p.1).max().unwrap_or(0) + H + 2 * PAD + ROW / 2;
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" \
         width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"the workflow's graph\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" /></marker></defs>"
    );
    let active = |n: Node<'_>| match (n, path) {
        (_, None) => false,
        (Node::Event(e), Some(p)) => p.events.contains(e),
        (Node::Step(s), Some(p)) => p.executions.get(s).copied().unwrap_or(0) > 0,
    };
    for e in &edges {
        let (Some(&(x1, y1)), Some(&(x2, y2))) = (place.get(&e.from), place.get(&e.to)) else {
            continue;
        };
        let (sx, sy, tx, ty) = (x1 + W, y1 + H / 2, x2, y2 + H / 2);
        let d = if tx > sx {
            let bend = (tx - sx) / 2;
            format!(
                "M{sx},{sy} C{},{sy} {},{ty} {tx},{ty}",
                sx + bend,
                tx - bend
            )
        } else {
            // A way back (a cycle): an arc under both nodes.
            let low = y1.max(y2) + H + ROW / 3;
            format!(
                "M{},{} C{},{low} {},{low} {},{}",
                x1 + W / 2,
                y1 + H,
                x1 + W / 2,
                x2 + W / 2,
                x2 + W / 2,
                y2 + H
            )
        };
        let hot = active(e.from) && active(e.to);
        let _ = write!(
            out,
            "<path class=\"edge{}{}\" d=\"{d}\" marker-end=\"url(#arrow)\"/>",
            if hot { " hot" } else { "" },
            if e.dashed { " dashed" } else { "" }
        );
        if let Some(label) = &e.label {
            let _ = write!(
                out,
                "<text class=\"edge-label\" x=\"{}\" y=\"{}\">{}</text>",
                (sx + tx) / 2,
                (sy + ty) / 2 - 4,
                esc(label)
            );
        }
    }
    for n in &nodes {
        let Some(&(x, y)) = place.get(n) else {
            continue;
        };
        let (kind, name, rx) = match *n {
            Node::Event(e) => ("event", e, H / 2),
            Node::Step(s) => ("step", s, 4),
        };
        let mut class = format!("node {kind}");
        let mut label = short(name);
        if active(*n) {
            class.push_str(if kind == "step" { " ran" } else { " seen" });
        }
        if let (Node::Step(s), Some(p)) = (*n, path) {
            if let Some(&count) = p.executions.get(s).filter(|&&c| c > 0) {
                let _ = write!(label, " ×{count}");
            }
            if p.running.contains(s) {
                class.push_str(" running");
            }
        }
        let _ = write!(
            out,
            "<g class=\"{class}\" data-{kind}=\"{attr}\"><title>{kind} {attr}</title>\
             <rect x=\"{x}\" y=\"{y}\" width=\"{W}\" height=\"{H}\" rx=\"{rx}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text></g>",
            x + W / 2,
            y + H / 2 + 5,
            esc(&label),
            attr = esc(name),
        );
    }
    out.push_str("</svg>");
    out
}

/// A name cut to what fits a node.
fn short(name: &str) -> String {
    if name.chars().count() <= 20 {
        name.to_string()
    } else {
        name.chars().take(19).chain(['…']).collect()
    }
}

fn nodes_and_edges(spec: &WorkflowSpec) -> (Vec<Node<'_>>, Vec<Edge<'_>>) {
    let mut nodes: Vec<Node<'_>> = Vec::new();
    let mut seen = HashSet::new();
    let mut add = |n, nodes: &mut Vec<_>| {
        if seen.insert(n) {
            nodes.push(n);
        }
    };
    let mut edges = Vec::new();
    // Events first in order of mention, so a layer lists them as the spec does.
    for s in &spec.steps {
        for p in &s.params {
            for t in &p.types {
                add(Node::Event(t), &mut nodes);
                let label = match p.kind {
                    ParamKind::Required => None,
                    ParamKind::Optional => Some("optional".to_string()),
                    ParamKind::List => Some("list".to_string()),
                    ParamKind::FixedList => Some(format!("{} of", p.size.unwrap_or(0))),
                };
                edges.push(Edge {
                    from: Node::Event(t),
                    to: Node::Step(&s.name),
                    label,
                    dashed: p.kind == ParamKind::Optional,
                });
            }
        }
        add(Node::Step(&s.name), &mut nodes);
        for o in &s.outputs {
            add(Node::Event(o), &mut nodes);
            let later = s.delayed.contains(o);
            edges.push(Edge {
                from: Node::Step(&s.name),
                to: Node::Event(o),
                label: later.then(|| "later".to_string()),
                dashed: later,
            });
        }
    }
    (nodes, edges)
}

/// Each node's top-left corner: columns by the longest way in from the events no step
/// returns (the edges that close a cycle set aside, found depth first), so a step sits right
/// of everything it takes; rows ordered by where their predecessors sit (one sweep).
fn layout<'a>(nodes: &[Node<'a>], edges: &[Edge<'a>]) -> HashMap<Node<'a>, (i64, i64)> {
    let back = back_edges(nodes, edges);
    let forward: Vec<(Node<'a>, Node<'a>)> = edges
        .iter()
        .enumerate()
        .filter(|(i, _)| !back.contains(i))
        .map(|(_, e)| (e.from, e.to))
        .collect();
    // Longest path over what is left (a DAG): relax in rounds, at most one per node.
    let mut layer: HashMap<Node<'a>, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for _ in 0..nodes.len() {
        let mut changed = false;
        for (from, to) in &forward {
            let want = layer[from] + 1;
            if layer[to] < want {
                layer.insert(*to, want);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut columns: Vec<Vec<Node<'a>>> = Vec::new();
    for n in nodes {
        let l = layer[n];
        if columns.len() <= l {
            columns.resize_with(l + 1, Vec::new);
        }
        columns[l].push(*n);
    }
    let mut row: HashMap<Node<'a>, f64> = HashMap::new();
    for col in &mut columns {
        // The mean row of each node's predecessors placed so far; nodes without keep order.
        let key = |n: &Node<'a>, i: usize| {
            let preds: Vec<f64> = edges
                .iter()
                .filter(|e| e.to == *n)
                .filter_map(|e| row.get(&e.from).copied())
                .collect();
            if preds.is_empty() {
                i as f64
            } else {
                preds.iter().sum::<f64>() / preds.len() as f64
            }
        };
        let mut keyed: Vec<(f64, usize, Node<'a>)> = col
            .iter()
            .enumerate()
            .map(|(i, n)| (key(n, i), i, *n))
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        *col = keyed.into_iter().map(|(_, _, n)| n).collect();
        for (i, n) in col.iter().enumerate() {
            row.insert(*n, i as f64);
        }
    }
    let mut place = HashMap::new();
    for (c, col) in columns.iter().enumerate() {
        for (r, n) in col.iter().enumerate() {
            place.insert(*n, (PAD + c as i64 * COL, PAD + r as i64 * ROW));
        }
    }
    place
}

/// The edges (by index) that close a cycle: those a depth-first walk from the ways in (then
/// from any node left) finds pointing at a node still on its path.
fn back_edges(nodes: &[Node<'_>], edges: &[Edge<'_>]) -> HashSet<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let index: HashMap<Node<'_>, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut out_edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nodes.len()];
    let mut has_input = vec![false; nodes.len()];
    for (i, e) in edges.iter().enumerate() {
        if let (Some(&a), Some(&b)) = (index.get(&e.from), index.get(&e.to)) {
            out_edges[a].push((i, b));
            has_input[b] = true;
        }
    }
    let mut mark = vec![Mark::New; nodes.len()];
    let mut back = HashSet::new();
    let roots = (0..nodes.len())
        .filter(|&n| !has_input[n])
        .chain(0..nodes.len())
        .collect::<Vec<_>>();
    for root in roots {
        if mark[root] != Mark::New {
            continue;
        }
        // An explicit stack of (node, next edge to look at): no recursion on user input.
        let mut stack = vec![(root, 0usize)];
        mark[root] = Mark::OnPath;
        while let Some(&mut (n, ref mut next)) = stack.last_mut() {
            if let Some(&(edge, to)) = out_edges[n].get(*next) {
                *next += 1;
                match mark[to] {
                    Mark::OnPath => {
                        back.insert(edge);
                    }
                    Mark::New => {
                        mark[to] = Mark::OnPath;
                        stack.push((to, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[n] = Mark::Done;
                stack.pop();
            }
        }
    }
    back
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec() -> WorkflowSpec {
        serde_json::from_value(serde_json::json!({
            "name": "loop",
            "steps": [
                {"name": "ask", "params": [{"name": "q", "kind": "required", "types": ["UserMessageEvent"]},
                                           {"name": "again", "kind": "optional", "types": ["Retry"]}],
                 "outputs": ["Asked"]},
                {"name": "judge", "params": [{"name": "a", "kind": "required", "types": ["Asked"]}],
                 "outputs": ["Retry", "StopEvent"]}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn every_step_and_event_is_drawn_once_with_the_run_path_on_it() {
        let mut path = RunPath::default();
        path.executions.insert("ask".into(), 2);
        path.executions.insert("judge".into(), 1);
        path.events
            .extend(["UserMessageEvent", "Asked"].map(String::from));
        path.running.insert("judge".into());
        let svg = svg(&spec(), Some(&path));
        for n in ["ask", "judge"] {
            assert_eq!(
                svg.matches(&format!("data-step=\"{n}\"")).count(),
                1,
                "{svg}"
            );
        }
        for e in ["UserMessageEvent", "Retry", "Asked", "StopEvent"] {
            assert_eq!(
                svg.matches(&format!("data-event=\"{e}\"")).count(),
                1,
                "{e}"
            );
        }
        assert!(svg.contains("ask ×2"), "{svg}");
        assert!(svg.contains("class=\"node step ran running\" data-step=\"judge\""));
        assert!(svg.contains("class=\"node event\" data-event=\"StopEvent\""));
        // UserMessageEvent → ask, ask → Asked and Asked → judge were taken; judge → Retry not.
        assert_eq!(svg.matches("class=\"edge hot").count(), 3, "{svg}");
        assert!(svg.contains("optional"));
    }

    #[test]
    fn the_ways_in_come_first_and_a_cycle_goes_back_below() {
        let spec = spec();
        let (nodes, edges) = nodes_and_edges(&spec);
        let place = layout(&nodes, &edges);
        let x = |n| place[&n].0;
        assert_eq!(x(Node::Event("UserMessageEvent")), PAD);
        assert!(x(Node::Step("ask")) > x(Node::Event("UserMessageEvent")));
        assert!(x(Node::Step("judge")) > x(Node::Event("Asked")));
        // Retry is judge's output and ask's input: its edge into ask goes back.
        assert!(x(Node::Event("Retry")) > x(Node::Step("ask")));
        assert!(svg(&spec, None).contains("<svg"));
    }

    #[test]
    fn a_step_that_joins_sits_right_of_every_event_it_takes() {
        let spec: WorkflowSpec = serde_json::from_value(serde_json::json!({
            "name": "approval",
            "steps": [
                {"name": "propose", "params": [{"name": "m", "kind": "required", "types": ["UserMessageEvent"]}],
                 "outputs": ["Requested"]},
                {"name": "decide", "params": [{"name": "r", "kind": "required", "types": ["Requested"]},
                                              {"name": "a", "kind": "required", "types": ["Given"]}],
                 "outputs": ["Done"]}
            ]
        }))
        .unwrap();
        let (nodes, edges) = nodes_and_edges(&spec);
        let place = layout(&nodes, &edges);
        let x = |n| place[&n].0;
        assert!(x(Node::Step("decide")) > x(Node::Event("Requested")));
        assert!(x(Node::Step("decide")) > x(Node::Event("Given")));
        // Nothing is drawn as a way back in a graph without cycles.
        assert!(back_edges(&nodes, &edges).is_empty());
    }
}
