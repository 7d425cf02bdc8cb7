//! `fake-anthropic [--port N] [--script FILE.json]`: the scripted fake Messages API as a server.

use ccwire_tests::fake_anthropic::{FakeAnthropic, Script};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut port = 0u16;
    let mut script = Script::new().when(
        ccwire_tests::Match::Any,
        ccwire_tests::Reply::text("Hello from the fake model."),
    );
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => port = args.next().ok_or("--port needs a number")?.parse()?,
            "--script" => {
                let path = args.next().ok_or("--script needs a file")?;
                script = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
            }
            other => {
                return Err(format!("unknown argument {other}; use --port N --script FILE").into())
            }
        }
    }
    let server = FakeAnthropic::bind(([127, 0, 0, 1], port).into(), script).await?;
    println!("{}", server.base_url());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
