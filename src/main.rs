//! The `burstsim` command: parse, dispatch, print the error chain once, exit.

use std::process::ExitCode;

use burstsim::cli::{Cli, Command};
use burstsim::commands;
use clap::{CommandFactory, Parser};

fn main() -> ExitCode {
    let cli = Cli::parse();
    burstsim::interrupt::install();
    burstsim::colour::set(cli.color);
    let result = match &cli.command {
        Command::Run(args) => commands::run(args).map(|()| true),
        Command::Size(args) => commands::size(args).map(|()| true),
        Command::Sweep(args) => commands::sweep(args).map(|()| true),
        Command::Merge(args) => commands::merge(args).map(|()| true),
        Command::Live(args) => commands::live(args).map(|()| true),
        Command::Probe(args) => commands::probe(args),
        Command::Export(args) => commands::export(args).map(|()| true),
        Command::Check(args) => commands::check(args),
        Command::Partition(args) => commands::partition(args).map(|()| true),
        Command::Import(args) => commands::import(args).map(|()| true),
        Command::Validate { scenario } => commands::validate(scenario).map(|()| true),
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "burstsim",
                &mut std::io::stdout(),
            );
            Ok(true)
        }
    };
    match result {
        Err(err) if burstsim::interrupt::caused(&err) => {
            eprintln!("interrupted; earlier results, if any, are as they were");
            ExitCode::from(130)
        }
        _ if burstsim::interrupt::requested() => {
            eprintln!("interrupted; the results were written before it took effect");
            ExitCode::from(130)
        }
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "{}{}",
                burstsim::colour::error_prefix(),
                burstsim::input::shorten_message(&error_chain(&err))
            );
            ExitCode::from(2)
        }
    }
}

/// The error and its causes, `outer: inner`, each cause once: a cause whose
/// text its parent already ends with (an I/O error wrapped by a client
/// library, say) is not repeated.
fn error_chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain().map(ToString::to_string) {
        if text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// `burstsim run … | head` closing the pipe early is not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
