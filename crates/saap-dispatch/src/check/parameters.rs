//! Findings about a step's event parameters: fixed lists larger than their producers can
//! fill, the optional-parameter trap, list re-runs, one type in two parameters, double-dips,
//! parent-typed parameters.

use super::*;

impl Analysis<'_> {
    pub(super) fn fixed_list_overcounts(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if p.kind != ParamKind::FixedList || self.missing.contains(&(si, pi)) {
                    continue;
                }
                let mut capacity: u64 = 0;
                let mut known = true;
                let mut parts: Vec<String> = Vec::new();
                for &t in &p.types {
                    if !self.dispatchable(t) {
                        continue;
                    }
                    if self.outside[t as usize] {
                        known = false;
                        break;
                    }
                    for &prod in &self.producers[t as usize] {
                        let ps = &self.spec.steps[prod];
                        // A step that returns a list of the type (`max: unbounded`, a `Vec`
                        // result) can fill any fixed list: no count to prove.
                        let Some(mult) = ps.max_per_execution(t) else {
                            known = false;
                            break;
                        };
                        let Some(max) = ps.max_executions_per_run else {
                            known = false;
                            break;
                        };
                        let mult = mult.max(1);
                        capacity += u64::from(max) * mult;
                        parts.push(format!(
                            "`{}` ({max} execution{} × {mult} `{}`)",
                            ps.name,
                            if max == 1 { "" } else { "s" },
                            self.name(t)
                        ));
                    }
                    if !known {
                        break;
                    }
                }
                if !known || capacity == 0 || u64::from(p.size) <= capacity {
                    continue;
                }
                out.push(
                    &FIXED_LIST_OVERCOUNT,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "the fixed list waits for {} events, but its producers can emit at most {capacity} in a run: {}",
                        p.size,
                        capped_join(parts.iter().cloned(), parts.len())
                    ),
                    "R1 / DESIGN §4.3: a fixed list is ready only with N matching events; the producers' max_executions_per_run caps how many can ever exist, so the step never runs",
                    format!(
                        "set `size: {capacity}` to match the producers, add the missing producers, or, if a producer returns several per execution, say so in its `outputs` (`{{event: {}, max: N}}`, or `max: unbounded` for a list)",
                        p.types.first().map_or("", |t| self.name(*t))
                    ),
                );
            }
        }
    }

    pub(super) fn optional_traps(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if s.precondition.is_some() || s.max_executions_per_run.is_some() {
                continue;
            }
            let required: Vec<&str> = s
                .params
                .iter()
                .filter(|p| p.kind != ParamKind::Optional)
                .map(|p| p.name.as_str())
                .collect();
            for (pi, p) in s.params.iter().enumerate() {
                if p.kind != ParamKind::Optional {
                    continue;
                }
                let first = match required.len() {
                    0 => "any of its inputs arrives".to_string(),
                    1 => format!("`{}` is present", required[0]),
                    _ => format!(
                        "{} are present",
                        required
                            .iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                out.push(
                    &OPTIONAL_TRAP,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` runs as soon as {first}, with `{}` = none, and again when {} arrives",
                        s.name,
                        p.name,
                        self.names(&p.types)
                    ),
                    "R1 + R2 / DESIGN §4.3, §4.4: optional parameters never block, so the step fires on minimum viable input; a later event for the optional parameter forms a new input set and re-runs the step",
                    format!(
                        "add a precondition that waits for it (`precondition: {{name: wait_for_{0}, reads: [{1}], when: {{present: {0}}}}}`), set `max_executions_per_run: 1` if one run is enough, or make `{0}` required if it always arrives",
                        p.name,
                        // The precondition reads whichever member of a union arrives.
                        p.types
                            .iter()
                            .map(|t| self.name(*t))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }

    pub(super) fn list_reruns(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if s.precondition.is_some() {
                continue;
            }
            for (pi, p) in s.params.iter().enumerate() {
                if p.kind != ParamKind::List {
                    continue;
                }
                out.push(
                    &LIST_RERUNS,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` runs again on every arrival of {}, each time with the list so far",
                        s.name,
                        self.names(&p.types)
                    ),
                    "R3 + R2 / DESIGN §4.3, §4.4: a list never blocks and binds all matching events at trigger time; each new event changes the input set and re-runs the step",
                    format!(
                        "if the count is known, make it `kind: fixed_list` with `size: N`; otherwise add a precondition such as `when: {{count_at_least: {{param: {}, n: N}}}}`",
                        p.name
                    ),
                );
            }
        }
    }

    pub(super) fn same_type_two_params(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (j, q) in s.params.iter().enumerate() {
                for p in &s.params[..j] {
                    let shared: Vec<TypeId> = q
                        .types
                        .iter()
                        .copied()
                        .filter(|t| p.types.contains(t))
                        .collect();
                    if shared.is_empty() {
                        continue;
                    }
                    out.push(
                        &SAME_TYPE_TWO_PARAMS,
                        self,
                        Some(si),
                        Some(j),
                        format!(
                            "parameters `{}` and `{}` both take {}",
                            p.name,
                            q.name,
                            self.names(&shared)
                        ),
                        "DESIGN §4.4: each single parameter binds the trigger or the latest matching event, so both parameters can bind the same event; which one gets which is decided by arrival, not by meaning",
                        "take the events once: one `list` or `fixed_list` parameter (`size: 2`), or give each stage its own event type".to_string(),
                    );
                }
            }
        }
    }

    pub(super) fn double_dips(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            // A type shared by several parameters is reported once per step (SAAP012 covers
            // the sharing itself).
            let mut reported: BTreeSet<TypeId> = BTreeSet::new();
            for (pi, p) in s.params.iter().enumerate() {
                let own: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| self.dispatchable(*t) && self.outs[si].contains(t))
                    .collect();
                if !own.is_empty() {
                    out.push(
                        &DOUBLE_DIP,
                        self,
                        Some(si),
                        Some(pi),
                        format!(
                            "`{}` takes {} and also returns it: its own output re-triggers it and competes with the upstream event",
                            s.name,
                            self.names(&own)
                        ),
                        "R2 / DESIGN §4.1, §4.4: the returned event is a new event of a type the step takes, so it makes the step (and every other consumer) a candidate again and becomes the latest binding",
                        "give each logical stage its own event type (e.g. `Stage1Result`, `Stage2Result`)".to_string(),
                    );
                }
                if !matches!(p.kind, ParamKind::Required | ParamKind::Optional) {
                    continue;
                }
                let mut shared: Vec<TypeId> = Vec::new();
                let mut sources: Vec<String> = Vec::new();
                for &t in &p.types {
                    if !self.dispatchable(t) || !reported.insert(t) {
                        continue;
                    }
                    // The step's own output is the self-consumption finding above.
                    let prods = &self.producers[t as usize];
                    let others = prods.len() - usize::from(prods.binary_search(&si).is_ok());
                    let count = others + usize::from(self.outside[t as usize]);
                    if count < 2 {
                        continue;
                    }
                    shared.push(t);
                    let mut src = capped_list(
                        prods
                            .iter()
                            .filter(|&&x| x != si)
                            .map(|&x| self.spec.steps[x].name.as_str()),
                        others,
                    );
                    if self.outside[t as usize] {
                        if !src.is_empty() {
                            src.push_str(", ");
                        }
                        src.push_str("outside arrivals");
                    }
                    sources.push(src);
                }
                if shared.is_empty() {
                    continue;
                }
                let sources = if shared.len() == 1 {
                    sources.join("")
                } else {
                    shared
                        .iter()
                        .zip(&sources)
                        .map(|(t, src)| format!("`{}`: {src}", self.name(*t)))
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                out.push(
                    &DOUBLE_DIP,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "{} is produced by several stages ({}); `{}` runs once per event and binds whichever arrived last",
                        self.names(&shared),
                        sources,
                        s.name
                    ),
                    "R2 / DESIGN §4.1, §4.4: every event of the type makes the step a candidate and a single parameter binds the trigger or the latest event, so the step fires for each stage and cannot tell them apart",
                    "give each stage its own event type; if the events are parts to join, take them with a `fixed_list` (or a `list` with a precondition)".to_string(),
                );
            }
        }
    }

    pub(super) fn parent_typed_params(&self, out: &mut Out) {
        let mut emitted: BTreeSet<TypeId> = self.outs.iter().flatten().copied().collect();
        if let Some(sim) = &self.spec.source.simulation {
            emitted.extend(
                sim.arrivals
                    .iter()
                    .filter_map(|a| self.spec.type_id(&a.event)),
            );
        }
        // Ancestor -> its emitted, dispatchable proper subtypes (in type order).
        let mut subs_of: BTreeMap<TypeId, Vec<TypeId>> = BTreeMap::new();
        for &e in emitted.iter().filter(|&&e| self.dispatchable(e)) {
            for a in self
                .spec
                .hierarchy
                .lineage(self.name(e))
                .unwrap_or_default()
            {
                match self.spec.type_id(a) {
                    Some(a) if a != e => subs_of.entry(a).or_default().push(e),
                    _ => {}
                }
            }
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                for &parent in &p.types {
                    if self.spec.type_info(parent).kind.is_terminal() {
                        continue;
                    }
                    let pname = self.name(parent);
                    let subs: Vec<TypeId> = subs_of
                        .get(&parent)
                        .map(|v| v.iter().copied().filter(|t| !p.types.contains(t)).collect())
                        .unwrap_or_default();
                    if subs.is_empty() {
                        continue;
                    }
                    out.push(
                        &PARENT_TYPED_PARAM,
                        self,
                        Some(si),
                        Some(pi),
                        format!(
                            "the parameter takes `{pname}`, but what is produced or arrives is its subtype {}, which will not match",
                            self.names(&subs)
                        ),
                        "DESIGN §4.1: candidacy and binding match the exact event name; a subtype does not match a parameter typed with its parent",
                        format!(
                            "list every concrete type the parameter accepts: `types: [{}]`",
                            p.types
                                .iter()
                                .chain(subs.iter())
                                .map(|t| self.name(*t))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
            }
        }
    }
}
