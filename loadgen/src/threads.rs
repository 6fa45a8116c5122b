//! One OS thread per client connection, each running a single-threaded runtime of its own, so
//! a connection's callers and the client that answers them never hop threads and connections
//! do not share a scheduler. Owns starting and joining those threads; it must not know what a
//! connection does (the caller's body) or how many there are.

use std::future::Future;
use std::thread::JoinHandle;

/// Runs `body(input)` for each input on a thread of its own, each a current-thread runtime,
/// once every one has ended (`join`), returns what they returned (a list per connection, one
/// item per stream, say) as one list, in input order.
pub async fn per_connection<I, T, F, Fut>(
    inputs: impl IntoIterator<Item = I>,
    body: F,
) -> anyhow::Result<Vec<T>>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(I) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<Vec<T>>>,
{
    let threads = inputs
        .into_iter()
        .map(|input| {
            let body = body.clone();
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(body(input))
            })
        })
        .collect();
    Ok(join(threads).await?.into_iter().flatten().collect())
}

/// Waits for every thread off the async runtime and returns their outputs in order; the first
/// error, or a thread that panicked, is the error.
pub async fn join<T: Send + 'static>(
    threads: Vec<JoinHandle<anyhow::Result<T>>>,
) -> anyhow::Result<Vec<T>> {
    tokio::task::spawn_blocking(move || {
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| anyhow::anyhow!("a load thread panicked"))?
            })
            .collect()
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_input_runs_on_a_thread_of_its_own_and_outputs_keep_their_order() {
        let out = per_connection(0..4u64, |i| async move {
            let thread = std::thread::current().id();
            Ok(vec![(i * 10, thread), (i * 10 + 1, thread)])
        })
        .await
        .unwrap();
        assert_eq!(
            out.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
            [0, 1, 10, 11, 20, 21, 30, 31]
        );
        let mut ids: Vec<_> = out.iter().map(|(_, id)| format!("{id:?}")).collect();
        ids.dedup();
        assert_eq!(ids.len(), 4, "{ids:?}");
    }

    #[tokio::test]
    async fn an_error_or_a_panic_is_the_error() {
        let failed = per_connection(0..3, |i| async move {
            anyhow::ensure!(i != 1, "connection {i} failed");
            Ok(vec![i])
        })
        .await;
        assert_eq!(failed.unwrap_err().to_string(), "connection 1 failed");
        let panicked = per_connection(0..2, |i| async move {
            assert!(i == 0, "connection {i} panics");
            Ok(vec![i])
        })
        .await;
        assert!(panicked.unwrap_err().to_string().contains("panicked"));
    }
}
