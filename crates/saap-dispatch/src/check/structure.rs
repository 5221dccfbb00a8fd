//! Findings about the workflow's shape: duplicate steps, no consumer of a start event,
//! steps taking a terminal event, inputs nothing produces, unreachable steps, display-only
//! inputs.

use super::*;

impl Analysis<'_> {
    pub(super) fn duplicate_steps(&self, out: &mut Out) {
        let mut first: BTreeMap<&str, usize> = BTreeMap::new();
        for (si, s) in self.spec.steps.iter().enumerate() {
            match first.get(s.name.as_str()) {
                None => {
                    first.insert(&s.name, si);
                }
                Some(&f) => out.push(
                    &DUPLICATE_STEP,
                    self,
                    Some(si),
                    None,
                    format!(
                        "steps[{si}] is named `{}` like steps[{f}]",
                        s.name
                    ),
                    "execution counts (max_executions_per_run) and input-set idempotency are kept per step name (DESIGN §4.3, §4.5): two steps with one name share them and suppress each other's executions",
                    format!("rename one of the two steps (e.g. `{}_2`)", s.name),
                ),
            }
        }
    }

    pub(super) fn no_start_consumer(&self, out: &mut Out) {
        let any = self.spec.steps.iter().any(|s| {
            s.params.iter().any(|p| {
                p.types
                    .iter()
                    .any(|t| self.spec.type_info(*t).kind.is_start())
            })
        });
        if !any {
            out.push(
                &NO_START_CONSUMER,
                self,
                None,
                None,
                format!(
                    "no step of `{}` takes a start event (StartEvent or a subtype such as UserMessageEvent)",
                    self.spec.name
                ),
                "a run begins with its first start event (DESIGN §4.10) and only steps whose parameter types include that exact name become candidates (§4.1): with no start consumer nothing ever runs",
                "give the first step a parameter typed with the start event your callers send, e.g. `types: [UserMessageEvent]`".to_string(),
            );
        }
    }

    pub(super) fn terminal_inputs(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let terminal: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| self.spec.type_info(*t).kind.is_terminal())
                    .collect();
                if terminal.is_empty() {
                    continue;
                }
                out.push(
                    &TERMINAL_INPUT,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "the parameter takes {}, which ends the run",
                        self.names(&terminal)
                    ),
                    "R4 / DESIGN §4.7: when a stop or exception event is appended the run is terminated and no step is evaluated afterwards, so this parameter never binds anything",
                    "consume a dedicated control event emitted before the stop (e.g. `AnswerReady`), and return the stop event from the step that finishes the work".to_string(),
                );
            }
        }
    }

    pub(super) fn missing_producers(&mut self, out: &mut Out) {
        let mut missing = BTreeSet::new();
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if !Self::blocking(p.kind) {
                    continue;
                }
                let candidates: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| !self.spec.type_info(*t).kind.is_terminal())
                    .collect();
                if candidates.is_empty() {
                    continue; // SAAP003 explains it
                }
                let delivered = candidates.iter().any(|t| {
                    self.dispatchable(*t)
                        && (self.outside[*t as usize] || !self.producers[*t as usize].is_empty())
                });
                if delivered {
                    continue;
                }
                missing.insert((si, pi));
                let not_control: Vec<TypeId> = candidates
                    .iter()
                    .copied()
                    .filter(|t| !self.spec.type_info(*t).kind.is_control())
                    .collect();
                let detail = if not_control.is_empty() {
                    "no step returns it and it does not arrive from outside".to_string()
                } else {
                    format!(
                        "no step returns a control event of it and it does not arrive from outside ({} {} display-only: never dispatched)",
                        self.names(&not_control),
                        if not_control.len() == 1 { "is" } else { "are" }
                    )
                };
                let simulated: Vec<TypeId> = candidates
                    .iter()
                    .copied()
                    .filter(|t| self.simulated_arrivals.contains(t))
                    .collect();
                let detail = if simulated.is_empty() {
                    detail
                } else {
                    format!(
                        "{detail} (the simulation section delivers {}, but at runtime only start events and in-the-loop responses arrive from outside)",
                        self.names(&simulated)
                    )
                };
                let what = if p.kind == ParamKind::FixedList {
                    format!("{} events of", p.size)
                } else {
                    "an event of".to_string()
                };
                out.push(
                    &MISSING_PRODUCER,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` waits for {what} {}, but {detail}; the step can never run",
                        s.name,
                        self.names(&candidates)
                    ),
                    "R1 / DESIGN §4.3: a step is ready only when every required parameter has a matching event and every fixed list has N; with no producer the run stalls here",
                    format!(
                        "add the producing step (a step with {}), declare the event as arriving from outside by deriving it from StartEvent or a *InTheLoopResponseEvent, or make the parameter `optional` if the step can do without it",
                        // A union parameter is fed by any one of its member types.
                        match candidates.as_slice() {
                            [one] => format!("`outputs: [{}]`", self.name(*one)),
                            many => format!("one of {} among its `outputs`", self.names(many)),
                        }
                    ),
                );
            }
        }
        self.missing = missing;
    }

    pub(super) fn unreachable_steps(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if self.runs[si] || self.never_true[si] {
                continue;
            }
            let explained_missing = (0..s.params.len()).any(|pi| self.missing.contains(&(si, pi)));
            let blocked_by_terminal = s.params.iter().any(|p| {
                Self::blocking(p.kind)
                    && p.types
                        .iter()
                        .all(|t| self.spec.type_info(*t).kind.is_terminal())
            });
            if explained_missing || blocked_by_terminal {
                continue;
            }
            let has = |ts: &[TypeId]| ts.iter().any(|t| self.available[*t as usize]);
            let (param, message) = if s.params.is_empty() {
                (
                    None,
                    format!(
                        "`{}` has no event parameters, so no event ever makes it a candidate",
                        s.name
                    ),
                )
            } else if let Some((pi, p)) = s
                .params
                .iter()
                .enumerate()
                .find(|(_, p)| Self::blocking(p.kind) && !has(&p.types))
            {
                let mut prods: Vec<usize> = p
                    .types
                    .iter()
                    .flat_map(|t| self.producers[*t as usize].iter().copied())
                    .collect();
                prods.sort_unstable();
                prods.dedup();
                (
                    Some(pi),
                    format!(
                        "no path from a start event reaches `{}`: parameter `{}` waits for {}, whose producers ({}) never run themselves",
                        s.name,
                        p.name,
                        self.names(&p.types),
                        self.step_names(&prods)
                    ),
                )
            } else {
                let all: Vec<TypeId> = s
                    .params
                    .iter()
                    .flat_map(|p| p.types.iter().copied())
                    .collect();
                (
                    None,
                    format!(
                        "no path from a start event reaches `{}`: none of its parameter types ({}) is ever dispatched",
                        s.name,
                        self.names(&all)
                    ),
                )
            };
            out.push(
                &UNREACHABLE_STEP,
                self,
                Some(si),
                param,
                message,
                "DESIGN §4.1, R1: a step becomes a candidate only when an event of one of its parameter types is appended and runs only with all required inputs present; no chain of steps starting from an outside arrival (start events, in-the-loop responses) produces them",
                "connect the step: have a reachable step return one of its parameter types, or give it a parameter typed with the start event; otherwise delete it".to_string(),
            );
        }
    }

    pub(super) fn display_only_inputs(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if self.missing.contains(&(si, pi)) {
                    continue;
                }
                let never: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| !self.spec.type_info(*t).kind.is_control())
                    .collect();
                if never.is_empty() {
                    continue;
                }
                out.push(
                    &DISPLAY_ONLY_INPUT,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "{} {} not a control event: it never triggers `{}` and never binds",
                        self.names(&never),
                        if never.len() == 1 { "is" } else { "are" },
                        s.name
                    ),
                    "DESIGN §4.1: display-only events are published for the UI and never cause candidacy or enter the run's view",
                    "declare the event with `parents: [ControlAndDisplayEvent]` if it should both show and drive steps, or remove it from the parameter".to_string(),
                );
            }
        }
    }
}
