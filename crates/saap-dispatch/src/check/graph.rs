//! What the checks build on: which steps can run at all (reachability from the start and
//! outside events, with or without preconditions) and which can lead to a stop event.

use super::*;

impl Analysis<'_> {
    /// Least fixpoint: the types that can be dispatched and the steps that can run.
    /// Least fixpoint: the steps that can run and the types that can be dispatched. With
    /// `respect_preconditions`, steps whose precondition is never true do not run.
    ///
    /// A worklist over types: each type is made available once and visits its consumers
    /// once, so the cost is linear in the size of the spec.
    pub(super) fn reachability(&self, respect_preconditions: bool) -> (Vec<bool>, Vec<bool>) {
        let steps = &self.spec.steps;
        let mut runs = vec![false; steps.len()];
        let mut available = vec![false; self.spec.types.len()];
        let mut triggered = vec![false; steps.len()];
        let mut unmet: Vec<usize> = steps
            .iter()
            .map(|s| s.params.iter().filter(|p| Self::blocking(p.kind)).count())
            .collect();
        let mut satisfied: Vec<Vec<bool>> =
            steps.iter().map(|s| vec![false; s.params.len()]).collect();
        let mut queue: Vec<TypeId> = Vec::new();
        for (t, slot) in available.iter_mut().enumerate() {
            if self.outside[t] && self.dispatchable(t as TypeId) {
                *slot = true;
                queue.push(t as TypeId);
            }
        }
        while let Some(t) = queue.pop() {
            for &(c, p) in self.spec.consumers(t) {
                let (c, p) = (c as usize, p as usize);
                triggered[c] = true;
                if !satisfied[c][p] {
                    satisfied[c][p] = true;
                    if Self::blocking(steps[c].params[p].kind) {
                        unmet[c] -= 1;
                    }
                }
                if runs[c] || unmet[c] > 0 || (respect_preconditions && self.never_true[c]) {
                    continue;
                }
                runs[c] = true;
                for &o in &self.outs[c] {
                    if self.dispatchable(o) && !available[o as usize] {
                        available[o as usize] = true;
                        queue.push(o);
                    }
                }
            }
        }
        (runs, available)
    }

    /// Per step: some chain from it leads to a stop or exception event (through steps that
    /// could run). Backwards from the steps that return one; linear in the spec's size.
    pub(super) fn leads_to_end(&self) -> Vec<bool> {
        let steps = &self.spec.steps;
        let mut ends = vec![false; steps.len()];
        let mut type_done = vec![false; self.spec.types.len()];
        let mut stack: Vec<usize> = Vec::new();
        // A request to a human, agent or bot is answered from outside: it leads on to the
        // steps that take the responses.
        let asks: Vec<bool> = self
            .outs
            .iter()
            .map(|o| {
                o.iter().any(|&t| {
                    REQUEST_ROOTS
                        .iter()
                        .any(|r| self.spec.hierarchy.is_subtype_of(self.name(t), r))
                })
            })
            .collect();
        let answers = |c: usize| {
            steps[c]
                .params
                .iter()
                .flat_map(|p| p.types.iter())
                .any(|&t| self.outside[t as usize] && !self.spec.type_info(t).kind.is_start())
        };
        for (si, outs) in self.outs.iter().enumerate() {
            let terminal = outs.iter().any(|&t| {
                let k = self.spec.type_info(t).kind;
                k.is_control() && k.is_terminal()
            });
            if self.could_run[si] && terminal {
                ends[si] = true;
                stack.push(si);
            }
        }
        let mut answered = false;
        while let Some(c) = stack.pop() {
            for p in &steps[c].params {
                for &t in &p.types {
                    if !self.dispatchable(t) || type_done[t as usize] {
                        continue;
                    }
                    type_done[t as usize] = true;
                    for &s in &self.producers[t as usize] {
                        if self.could_run[s] && !ends[s] {
                            ends[s] = true;
                            stack.push(s);
                        }
                    }
                }
            }
            if !answered && answers(c) {
                answered = true;
                for s in 0..steps.len() {
                    if asks[s] && self.could_run[s] && !ends[s] {
                        ends[s] = true;
                        stack.push(s);
                    }
                }
            }
        }
        ends
    }
}
