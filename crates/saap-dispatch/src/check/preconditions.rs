//! Findings about preconditions: one that can never be true, one that reads an event type
//! its step does not take.

use super::*;

impl Analysis<'_> {
    pub(super) fn never_true_preconditions(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if !self.never_true[si] {
                continue;
            }
            let name = s.precondition.as_ref().map_or("", |p| p.name.as_str());
            out.push(
                &PRECONDITION_NEVER_TRUE,
                self,
                Some(si),
                None,
                format!(
                    "precondition `{name}` can never be true given the step's parameter kinds; the step never runs"
                ),
                "R5 / DESIGN §4.3: the precondition is the last readiness check and is re-evaluated only when an input of the step arrives; if it is always false the step is skipped every time and everything downstream stalls",
                "make the condition satisfiable: a required parameter binds exactly one event and an optional one at most one, so use `present:`/`count_at_least:` on a list or fixed list, or remove the precondition".to_string(),
            );
        }
    }

    pub(super) fn foreign_precondition_reads(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            let Some(pc) = &s.precondition else { continue };
            let taken: BTreeSet<TypeId> = s
                .params
                .iter()
                .flat_map(|p| p.types.iter().copied())
                .collect();
            let mut foreign: Vec<TypeId> = pc
                .reads
                .iter()
                .copied()
                .filter(|t| !taken.contains(t))
                .collect();
            foreign.dedup();
            if foreign.is_empty() {
                continue;
            }
            out.push(
                &PRECONDITION_FOREIGN_READ,
                self,
                Some(si),
                None,
                format!(
                    "precondition `{}` reads {}, which `{}` does not take",
                    pc.name,
                    self.names(&foreign),
                    s.name
                ),
                "DESIGN §3, R5: a precondition sees only the step's own bound inputs; an event type read only by a precondition never causes candidacy (§4.1), so the precondition cannot see it and the step may never become ready",
                format!(
                    "add a parameter to `{}` for {} (optional if the step can run without it), or stop reading it in the precondition",
                    s.name,
                    self.names(&foreign)
                ),
            );
        }
    }
}
