//! Findings about how a run ends: cycles without a bound, stop events returned with
//! others (dangling stop), steps from which no stop event can be reached.

use super::*;

impl Analysis<'_> {
    pub(super) fn unbounded_cycles(&self, out: &mut Out) {
        let ns = self.spec.steps.len();
        // Nodes 0..ns are steps, ns.. are types: step -> type it returns, type -> step that
        // takes it. Linear in the spec (a type with P producers and C consumers is P + C
        // edges, not P x C). Fixed lists are left out: they bind the first N events and
        // later arrivals bind nothing new (§4.4), so they cannot sustain a loop.
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); ns + self.spec.types.len()];
        for (si, o) in self.outs.iter().enumerate() {
            for &t in o {
                if self.dispatchable(t) {
                    edges[si].push(ns + t as usize);
                }
            }
        }
        for (si, st) in self.spec.steps.iter().enumerate() {
            for p in st.params.iter().filter(|p| p.kind != ParamKind::FixedList) {
                for &t in &p.types {
                    if self.dispatchable(t) {
                        edges[ns + t as usize].push(si);
                    }
                }
            }
        }
        for e in &mut edges {
            e.sort_unstable();
            e.dedup();
        }
        for nodes in strongly_connected(&edges) {
            // A cycle always passes through a type, so a one-node component is acyclic.
            if nodes.len() < 2 {
                continue;
            }
            let comp: Vec<usize> = nodes.iter().copied().filter(|&x| x < ns).collect();
            let via: Vec<TypeId> = nodes
                .iter()
                .filter(|&&x| x >= ns)
                .map(|&x| (x - ns) as TypeId)
                .collect();
            let bounded = comp.iter().any(|&s| {
                let st = &self.spec.steps[s];
                st.max_executions_per_run.is_some() || st.precondition.is_some()
            });
            if bounded {
                continue;
            }
            let what = if comp.len() == 1 {
                format!("`{}` triggers itself", self.spec.steps[comp[0]].name)
            } else {
                format!("steps {} trigger each other", self.step_names(&comp))
            };
            out.push(
                &UNBOUNDED_CYCLE,
                self,
                Some(comp[0]),
                None,
                format!(
                    "{what} through {}, and none of them has a precondition or max_executions_per_run",
                    self.names(&via)
                ),
                "R2 / DESIGN §4.3, §4.5: every returned event is new (a fresh id), so it forms a new input set and re-triggers its consumers; without a bound the loop runs forever",
                format!(
                    "bound the loop: set `max_executions_per_run` on `{}` or give it a precondition that ends the loop (e.g. an iteration count)",
                    self.spec.steps[comp[0]].name
                ),
            );
        }
    }

    pub(super) fn dangling_stops(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            let mut groups: Vec<(Vec<TypeId>, &'static str)> = s
                .returns_together
                .iter()
                .map(|g| (g.clone(), "returns_together"))
                .collect();
            if let Some(b) = self
                .spec
                .source
                .simulation
                .as_ref()
                .and_then(|sim| sim.behaviour.get(&s.name))
                .filter(|_| self.spec.step_index(&s.name) == Some(si as u32))
            {
                let resolve = |names: &[String]| -> Vec<TypeId> {
                    names.iter().filter_map(|n| self.spec.type_id(n)).collect()
                };
                if let Some(e) = &b.emit {
                    groups.push((resolve(e), "simulation.behaviour.emit"));
                }
                for x in b.executions.values() {
                    if let crate::spec::ExecutionBehaviour::Emit(e) = x {
                        groups.push((resolve(e), "simulation.behaviour.executions"));
                    }
                }
            }
            let mut seen: BTreeSet<Vec<TypeId>> = BTreeSet::new();
            for (g, origin) in groups {
                let terminal: Vec<TypeId> = g
                    .iter()
                    .copied()
                    .filter(|t| self.spec.type_info(*t).kind.is_terminal())
                    .collect();
                let control = g
                    .iter()
                    .filter(|t| self.spec.type_info(**t).kind.is_control())
                    .count();
                if terminal.is_empty() || control < 2 {
                    continue;
                }
                let mut key = g.clone();
                key.sort_unstable();
                if !seen.insert(key) {
                    continue;
                }
                out.push(
                    &DANGLING_STOP,
                    self,
                    Some(si),
                    None,
                    format!(
                        "`{}` returns [{}] in one result ({origin}): the stop event {} comes with other control events",
                        s.name,
                        self.names(&g),
                        self.names(&terminal)
                    ),
                    "R4 / DESIGN §4.7: the stop event terminates the run; control events returned with it are either dispatched to steps whose results arrive after the stop, or appended after it and kept only as after-stop evidence",
                    "return the stop event alone: emit the other events from an earlier step (and let the stop-returning step consume them), or make them display events".to_string(),
                );
            }
        }
    }

    pub(super) fn no_path_to_stop(&self, out: &mut Out) {
        let ends = self.leads_to_end();
        for (si, s) in self.spec.steps.iter().enumerate() {
            if !self.could_run[si] || ends[si] {
                continue;
            }
            let message = if self.outs[si].is_empty() {
                format!(
                    "`{}` returns no events, so no stop event can follow from it",
                    s.name
                )
            } else {
                format!(
                    "nothing `{}` returns ({}) leads to a stop event",
                    s.name,
                    self.names(&self.outs[si])
                )
            };
            out.push(
                &NO_PATH_TO_STOP,
                self,
                Some(si),
                None,
                message,
                "DESIGN §4.7 (termination): a run ends only when a stop or exception event is appended; a branch that never leads to one leaves the run open, holding its RunContext and bookkeeping until something else stops it",
                "make the branch end: have this step (or a step downstream of it) return a stop event, or feed its result into a step that does".to_string(),
            );
        }
    }
}
