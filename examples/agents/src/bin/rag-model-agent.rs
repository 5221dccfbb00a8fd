//! The retrieval agent answering with a language model, as a command-line program:
//! `rag-model-agent --help`. The model: `OPENAI_BASE_URL` (+ `OPENAI_API_KEY`,
//! `OPENAI_MODEL`) when set, else a scripted model on loopback.

fn main() -> std::process::ExitCode {
    saap::main(saap_examples::rag_model::workflow())
}
