use ccwire_core::Chunk;
use ccwire_host::{Client, ClientOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut options = ClientOptions::default();
    options.claude.args.include_partial_messages = true;
    let mut client = Client::connect(options).await?;
    let mut turn = client.query("Say hello.").await?;
    while let Some(chunk) = turn.next().await {
        if let Chunk::TextDelta { text, .. } = chunk? {
            print!("{text}");
        }
    }
    client.close().await;
    Ok(())
}
