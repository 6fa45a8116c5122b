//! Token buckets over the AcquireTokenBuckets stream: a group is granted within its fill rate,
//! its burst and PD's loans, alone and under contention with another group's clients.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_buckets_grant_within_the_fill_rate_and_the_burst() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    let (node, mut rm, _) = start_serving(&data).await;
    let (rate, burst) = (1000.0, 2000.0);
    add(&mut rm, ru_group("slow", rate as u64, burst as i64))
        .await
        .unwrap();

    let (send, mut replies) = token_stream(&mut rm).await;
    let started = Instant::now();
    // The first ask takes the whole burst and borrows the rest against the fill to come, as
    // PD does: 2000 held + 3000 of the first round (twice the fill rate, up to 10,000), all
    // 5000 trickled at 2000 RU/s: 2.5 s.
    send.send(token_request(
        &[("slow", 5000.0), ("default", 1e9), ("nope", 1.0)],
        7,
    ))
    .await
    .unwrap();
    let first = replies.message().await.unwrap().unwrap();
    assert_eq!(
        first
            .responses
            .iter()
            .map(|r| r.resource_group_name.as_str())
            .collect::<Vec<_>>(),
        ["slow", "default"],
        "a group that does not exist is skipped, as PD skips it"
    );
    assert_eq!(
        granted(&first),
        [5000.0, 1e9],
        "the default group is never refused"
    );
    let slow = &first.responses[0].granted_r_u_tokens[0];
    assert_eq!(slow.trickle_time_ms, 2500);
    assert_eq!(
        slow.granted_tokens
            .as_ref()
            .unwrap()
            .settings
            .as_ref()
            .unwrap()
            .burst_limit,
        2000
    );

    // Asking as fast as the stream answers: never more than the fill rate since the start, on
    // top of the burst and what the group now owes (its tokens below zero, read after).
    let mut total = 5000.0;
    let mut asks = 0;
    while started.elapsed() < Duration::from_millis(1500) {
        send.send(token_request(&[("slow", 500.0)], 7))
            .await
            .unwrap();
        total += granted(&replies.message().await.unwrap().unwrap())[0];
        asks += 1;
    }
    let tokens = tokens(&mut rm, "slow").await;
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        total <= rate * elapsed + burst - tokens.min(0.0) + 1e-6,
        "{total} RU granted in {elapsed:.3}s over {asks} asks, {tokens} left"
    );
    assert!(
        total >= rate * (elapsed - 0.5) + burst,
        "the bucket refills: {total} RU in {elapsed:.3}s"
    );

    // Lowering the fill rate takes effect on the open stream.
    modify(&mut rm, ru_group("slow", 1, 1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    send.send(token_request(&[("slow", 500.0)], 7))
        .await
        .unwrap();
    let after = granted(&replies.message().await.unwrap().unwrap())[0];
    // The change forgives the debt (as PD does): one 5 s period of 1 RU/s is lent.
    assert!(
        after <= 5.0,
        "{after} RU granted at 1 RU/s and a burst of 1"
    );
    drop(send);
    assert!(
        replies.message().await.unwrap().is_none(),
        "the stream ends with the client's"
    );
    node.stop().unwrap();
}

/// One grant a client was given: when it asked, when the answer came, what it was granted.
#[derive(Debug, Clone, Copy)]
struct Granted {
    sent: Instant,
    got: Instant,
    tokens: f64,
}

/// A client `client` of group `group` on its own stream, as TiDB's controller behaves: it asks
/// for `ask` RU every `pace`, and spends a loan over the trickle time it comes with before it
/// asks again, until `until`. Every grant, in order.
async fn ask_until(
    mut rm: Rm,
    group: &'static str,
    client: u64,
    ask: f64,
    pace: Duration,
    until: Instant,
) -> Vec<Granted> {
    let (send, mut replies) = token_stream(&mut rm).await;
    let mut grants = Vec::new();
    while Instant::now() < until {
        let sent = Instant::now();
        send.send(token_request(&[(group, ask)], client))
            .await
            .unwrap();
        let reply = replies.message().await.unwrap().unwrap();
        let got = Instant::now();
        let item = &reply.responses[0].granted_r_u_tokens[0];
        let tokens = item.granted_tokens.as_ref().unwrap().tokens;
        grants.push(Granted { sent, got, tokens });
        let trickle = Duration::from_millis(item.trickle_time_ms.max(0) as u64);
        tokio::time::sleep(trickle.max(pace)).await;
    }
    grants
}

/// Two groups under contention, each asked by two clients on their own streams for about
/// twice its fill rate, through kvproto's client against the real binary. Each group is held
/// to its own bucket whatever the other does: over any window, from any grant's request to
/// any reading of the group's tokens, the group is granted at most its fill rate over the
/// window plus its burst plus the debt it is left with (the pure bucket's promise); net of
/// that debt, each group gets its whole fill over the run on top of its burst; and the two
/// clients of a group, asking alike, share it alike (PD's even split).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_under_contention_each_get_their_fill_rate_and_no_more_over_any_window() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    let (node, mut rm, _) = start_serving(&data).await;
    // (group, fill rate, burst): a small and a large group.
    let groups: [(&'static str, f64, f64); 2] =
        [("small", 2000.0, 1000.0), ("large", 6000.0, 9000.0)];
    for (name, rate, burst) in groups {
        add(&mut rm, ru_group(name, rate as u64, burst as i64))
            .await
            .unwrap();
    }
    let pace = Duration::from_millis(20);
    let run = Duration::from_secs(3);
    let started = Instant::now();
    let until = started + run;
    let mut clients = Vec::new();
    for (g, &(name, rate, _)) in groups.iter().enumerate() {
        for c in 0..2u64 {
            // Each client asks for its group's whole fill rate: twice the fill in all.
            let ask = rate * pace.as_secs_f64();
            let client = rm.clone();
            let id = 100 + g as u64 * 10 + c;
            clients.push((
                g,
                tokio::spawn(ask_until(client, name, id, ask, pace, until)),
            ));
        }
    }
    // The groups' tokens read all along: the debt each is left with at each reading.
    let mut reader = rm.clone();
    let mut readings: Vec<Vec<(Instant, Instant, f64)>> = vec![Vec::new(); groups.len()];
    while Instant::now() < until + Duration::from_millis(200) {
        for (g, &(name, _, _)) in groups.iter().enumerate() {
            let sent = Instant::now();
            let held = tokens(&mut reader, name).await;
            readings[g].push((sent, Instant::now(), held));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut grants: Vec<Vec<Vec<Granted>>> = vec![Vec::new(); groups.len()];
    for (g, task) in clients {
        grants[g].push(task.await.unwrap());
    }

    for (g, &(name, rate, burst)) in groups.iter().enumerate() {
        let mut all: Vec<Granted> = grants[g].iter().flatten().copied().collect();
        all.sort_by_key(|x| x.sent);
        assert!(all.len() > 20, "{name}: {} grants", all.len());
        // Any window: from a grant's request (the server granted it no earlier) to a reading's
        // answer (the server read no later), the grants answered before the reading was asked.
        let mut windows = 0;
        for &(read_sent, read_got, held) in &readings[g] {
            let debt = (-held).max(0.0);
            for (i, start) in all.iter().enumerate() {
                let sum: f64 = all[i..]
                    .iter()
                    .filter(|x| x.got <= read_sent)
                    .map(|x| x.tokens)
                    .sum();
                if sum == 0.0 {
                    continue;
                }
                let window = read_got.duration_since(start.sent).as_secs_f64();
                let bound = rate * window + burst + debt;
                assert!(
                    sum <= bound * (1.0 + 1e-9) + 1e-6,
                    "{name}: {sum} RU granted over {window:.3}s, more than {rate} RU/s, a burst of {burst} and a debt of {debt}"
                );
                windows += 1;
            }
        }
        assert!(windows > 100, "{name}: only {windows} windows checked");

        // Its whole fill, net of what it owes at the end, on top of its burst: the other
        // group's contention took none of it.
        let &(_, _, held) = readings[g].last().unwrap();
        let total: f64 = all.iter().map(|x| x.tokens).sum();
        let first = all[0].got;
        let last = all.last().unwrap().sent;
        let served = last.duration_since(first).as_secs_f64();
        let net = total + held.min(0.0);
        assert!(
            net >= rate * (served - 0.3) + burst,
            "{name}: {net} RU net of the debt in {served:.3}s at {rate} RU/s and a burst of {burst}"
        );
        // The two clients, asking alike, share it alike.
        for (c, client) in grants[g].iter().enumerate() {
            let own: f64 = client.iter().map(|x| x.tokens).sum();
            assert!(
                own >= total / 3.0,
                "{name}: client {c} got {own} of {total} RU"
            );
        }
    }
    node.stop().unwrap();
}
