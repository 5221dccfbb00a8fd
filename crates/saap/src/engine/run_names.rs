//! A run's names as text ([`RunNames`]): its id (an engine-made one inline as hex) and its
//! thread's id (given, or made from a new id on first use). Kept on the run's slot and read
//! by a step's context, which knows no slot. Must not hold anything else of the run.

use super::ids::{HexId, RunIdText, hex_id};
use saap_dispatch::EventId;
use std::sync::{Arc, OnceLock};

/// The thread of a new run: given by its id, or a new one (its id made when first shown).
pub(crate) enum Thread {
    Given(Arc<str>),
    New(EventId),
}

/// The `new_thread` of a run whose thread was given: it has no id to make its text from.
const GIVEN_THREAD: EventId = EventId::from_bytes([0; 12]);

impl Thread {
    #[inline]
    fn parts(self) -> (OnceLock<Arc<str>>, EventId) {
        match self {
            Thread::Given(id) => (OnceLock::from(id), GIVEN_THREAD),
            Thread::New(id) => (OnceLock::new(), id),
        }
    }
}

/// A run's id and its thread's, as text made when first asked for.
pub(crate) struct RunNames {
    /// The run's id: an engine-made one as its hex text, inline.
    id: RunIdText,
    /// The run's id as shared text, made on first use ([`RunNames::run_id`]): a run of the
    /// in-memory store that nothing inspects never needs it.
    run_id: OnceLock<Arc<str>>,
    /// The thread's id as text: given, or made from `new_thread` on first use (most runs
    /// of the in-memory store never show it).
    thread_id: OnceLock<Arc<str>>,
    /// The id of the thread made for this run (when none was given).
    new_thread: EventId,
}

impl RunNames {
    #[inline]
    pub(super) fn new(id: RunIdText, thread: Thread) -> RunNames {
        let (thread_id, new_thread) = thread.parts();
        RunNames {
            id,
            run_id: OnceLock::new(),
            thread_id,
            new_thread,
        }
    }
    /// Gives these names to a new run; returns the ended run's id text (to drop outside the
    /// caller's lock).
    pub(super) fn rename(
        &mut self,
        id: [u8; 24],
        thread: Thread,
    ) -> (RunIdText, OnceLock<Arc<str>>) {
        (self.thread_id, self.new_thread) = thread.parts();
        (
            std::mem::replace(&mut self.id, RunIdText::Hex(HexId::new(id))),
            std::mem::take(&mut self.run_id),
        )
    }
    /// The run's id.
    #[inline]
    pub(crate) fn run_id(&self) -> &Arc<str> {
        match &self.id {
            RunIdText::Other(s) => s,
            RunIdText::Hex(b) => self.run_id.get_or_init(|| Arc::from(b.text())),
        }
    }
    /// The run's id, as the text of the run's id (its bytes; ASCII for engine-made ids).
    #[inline]
    pub(crate) fn id_text(&self) -> &RunIdText {
        &self.id
    }
    /// The run's id as a new `String`.
    pub(crate) fn run_id_string(&self) -> String {
        match &self.id {
            RunIdText::Other(s) => String::from(&**s),
            RunIdText::Hex(b) => String::from(b.text()),
        }
    }
    /// The id of the run's thread when it was given (not made from `new_thread`).
    #[inline]
    pub(crate) fn given_thread(&self) -> Option<&Arc<str>> {
        if self.new_thread == GIVEN_THREAD {
            self.thread_id.get()
        } else {
            None
        }
    }
    /// The id the run's thread text is made from when none was given.
    #[inline]
    pub(crate) fn new_thread(&self) -> EventId {
        self.new_thread
    }
    /// The id of the run's thread.
    #[inline]
    pub(crate) fn thread_id(&self) -> &Arc<str> {
        self.thread_id.get_or_init(|| hex_id(&self.new_thread))
    }
}
