//! `leaf bench`: HTTP load (N keep-alive connections, closed loop or a fixed rate) or gRPC
//! load (`leaf bench grpc`), through `leaf-loadgen`; a report as text or JSON.
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// `leaf bench [OPTIONS]` (HTTP) or `leaf bench grpc [OPTIONS]`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCmd {
    #[command(subcommand)]
    mode: Option<BenchMode>,
    #[command(flatten)]
    http: leaf_loadgen::BenchArgs,
}

#[derive(Subcommand, Debug)]
pub enum BenchMode {
    /// gRPC load: unary leaf.v1.IdService/GetSegmentIds, closed loop, over --connections
    /// HTTP/2 connections with --concurrency calls in flight on each.
    Grpc(leaf_loadgen::grpc::GrpcBenchArgs),
}

pub fn bench(cmd: BenchCmd) -> ExitCode {
    let (threads, json) = match &cmd.mode {
        Some(BenchMode::Grpc(g)) => (g.threads, g.json),
        None => (cmd.http.threads, cmd.http.json),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads as usize)
        .enable_all()
        .thread_name("leaf-bench")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match &cmd.mode {
            Some(BenchMode::Grpc(g)) => {
                leaf_loadgen::grpc::run_grpc(g).await.map(|r| (leaf_loadgen::grpc::render_grpc(&r), r))
            }
            None => leaf_loadgen::run(&cmd.http).await.map(|r| (leaf_loadgen::render(&r), r)),
        }
    });
    match result {
        Ok((_, report)) if json => match serde_json::to_string_pretty(&report) {
            Ok(j) => {
                println!("{j}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Ok((text, _)) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
