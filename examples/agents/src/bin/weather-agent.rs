//! The tool-using agent as a command-line program: `weather-agent --help`. The model:
//! `OPENAI_BASE_URL` (+ `OPENAI_API_KEY`, `OPENAI_MODEL`) when set, else a scripted model on
//! loopback.

fn main() -> std::process::ExitCode {
    match saap_examples::weather::workflow() {
        Ok(w) => saap::main(w),
        Err(e) => {
            eprintln!("error: the weather agent cannot start: {e}");
            std::process::ExitCode::from(3)
        }
    }
}
