//! The simulation's kubelet and StatefulSet controller, one round at a time on a background
//! thread: pods created for missing ordinals on the update revision (OnDelete), started from the
//! StatefulSet's own arguments as real `meridian serve` processes, readiness from each
//! member's `/ready`, claims released once their pod is gone.

use super::*;

pub(super) fn pod_name(ordinal: u32) -> String {
    format!("pd-{ordinal}")
}

pub(super) fn admin_addrs(state: &Mutex<State>) -> Vec<String> {
    let s = state.lock().unwrap();
    s.pods
        .values()
        .filter_map(|p| p.process.as_ref().map(|p| p.admin_addr.clone()))
        .collect()
}

/// One pass of the StatefulSet controller and the kubelet.
pub(super) fn kubelet_round(state: &Mutex<State>, env: &Env) {
    let mut to_stop = Vec::new();
    let mut to_start = Vec::new();
    {
        let mut s = state.lock().unwrap();
        let replicas = s
            .sts
            .as_ref()
            .and_then(|sts| sts.spec.as_ref()?.replicas)
            .unwrap_or(0) as u32;
        // Scale-in: pods past the replicas are deleted (Parallel policy: all at once).
        for pod in s.pods.values_mut() {
            if pod.ordinal >= replicas && !pod.terminating {
                pod.terminating = true;
                pod.ready_since = None;
            }
        }
        // Deleted pods go (a lost node's at once: nothing there to stop).
        let gone: Vec<u32> = s
            .pods
            .values()
            .filter(|p| p.terminating && !p.starting && !p.held)
            .map(|p| p.ordinal)
            .collect();
        for o in gone {
            let mut pod = s.pods.remove(&o).unwrap();
            if let Some(p) = pod.process.take() {
                to_stop.push(p);
            }
            s.log.push(format!("removed {}", pod_name(o)));
        }
        // Claims whose deletion waited for their pod.
        let in_use: Vec<String> = s.pods.keys().map(|o| pvc_name(&pod_name(*o))).collect();
        let released: Vec<String> = s
            .pvcs
            .iter()
            .filter(|(name, c)| c.deleting && !in_use.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in released {
            let claim = s.pvcs.remove(&name).unwrap();
            let _ = std::fs::remove_dir_all(&claim.dir);
            s.log.push(format!("deleted claim {name}"));
        }
        // OnDelete: missing ordinals are created on the update revision.
        if s.sts.is_some() {
            for o in 0..replicas {
                let claim = pvc_name(&pod_name(o));
                if s.pods.contains_key(&o) || s.pvcs.get(&claim).is_some_and(|c| c.deleting) {
                    continue;
                }
                s.next_uid += 1;
                let uid = s.next_uid;
                if !s.pvcs.contains_key(&claim) {
                    let dir = env.dir.join(format!("{claim}-{uid}"));
                    // The StatefulSet controller makes a claim from the template as stored.
                    let size = s.sts.as_ref().map(|sts| {
                        serde_json::to_value(sts).unwrap()["spec"]["volumeClaimTemplates"][0]
                            ["spec"]["resources"]["requests"]["storage"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string()
                    });
                    let size = size.unwrap_or_default();
                    s.pvcs.insert(
                        claim.clone(),
                        SimPvc {
                            uid: format!("pvc-uid-{uid}"),
                            dir,
                            deferred: false,
                            deleting: false,
                            requested: size.clone(),
                            capacity: size,
                        },
                    );
                }
                let revision = s.update_revision.clone();
                let pending = s.unschedulable.contains(&o);
                s.pods.insert(
                    o,
                    SimPod {
                        ordinal: o,
                        revision: revision.clone(),
                        uid,
                        process: None,
                        starting: !pending,
                        terminating: false,
                        node_lost: false,
                        pending,
                        lost_at: None,
                        held: false,
                        ready_since: None,
                    },
                );
                if pending {
                    s.log.push(format!("{} pending", pod_name(o)));
                    continue;
                }
                let port = *s.client_ports.entry(o).or_insert_with(free_udp_port);
                let dir = s.pvcs[&claim].dir.clone();
                s.log.push(format!("created {} {revision}", pod_name(o)));
                let args = template_args(s.sts.as_ref());
                to_start.push((o, uid, port, dir, args));
            }
        }
    }
    for p in to_stop {
        let _ = p.stop();
    }
    for (o, uid, port, dir, args) in to_start {
        let started = start_member(env, o, port, &dir, &args);
        let mut s = state.lock().unwrap();
        match (s.pods.get_mut(&o), started) {
            (Some(pod), Ok(process)) if pod.uid == uid => {
                pod.starting = false;
                if pod.terminating {
                    drop(s);
                    let _ = process.stop();
                } else {
                    pod.process = Some(process);
                }
            }
            (Some(pod), Err(e)) if pod.uid == uid => {
                // Crash-looping container: the next round tries again.
                s.log
                    .push(format!("start of {} failed: {e:#}", pod_name(o)));
                s.pods.remove(&o);
            }
            (_, Ok(process)) => {
                drop(s);
                let _ = process.stop();
            }
            _ => {}
        }
    }
    // Readiness probes.
    let probes: Vec<(u32, u64, String)> = {
        let s = state.lock().unwrap();
        s.pods
            .values()
            .filter(|p| !p.terminating)
            .filter_map(|p| Some((p.ordinal, p.uid, p.process.as_ref()?.admin_addr.clone())))
            .collect()
    };
    for (o, uid, admin) in probes {
        // As kubelet probes: no client certificate, the server's not verified (the members
        // run with --admin-open-probes, as the operator's StatefulSet has them).
        let ready = AdminClient::with_timeout(&admin, &Trust::Insecure, Duration::from_millis(300))
            .and_then(|c| c.get("/ready"))
            .is_ok_and(|(status, _)| status == 200);
        let mut s = state.lock().unwrap();
        if let Some(pod) = s
            .pods
            .get_mut(&o)
            .filter(|p| p.uid == uid && !p.terminating)
        {
            match (ready, pod.ready_since) {
                (true, None) => pod.ready_since = Some(Timestamp::now()),
                (false, Some(_)) => pod.ready_since = None,
                _ => {}
            }
        }
    }
}

/// The member container's arguments in a StatefulSet's pod template.
pub(super) fn template_args(sts: Option<&StatefulSet>) -> Vec<String> {
    sts.and_then(|s| s.spec.as_ref())
        .and_then(|spec| spec.template.spec.as_ref())
        .and_then(|pod| pod.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default()
}

/// The command line the operator's pod template gives a member, with what only a pod has
/// mapped to this host: the listen and advertise addresses and the data dir are the
/// harness's, `$(POD_NAME)` is the pod's name, and the mounted TLS files and config are the
/// sim's. Every other argument is passed as the operator wrote it, and one the sim does not
/// know fails the start: a flag the operator adds runs here before it runs in a cluster.
pub(super) fn member_args(
    template: &[String],
    env: &Env,
    ordinal: u32,
) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut args = template.iter();
    anyhow::ensure!(
        args.next().map(String::as_str) == Some("serve"),
        "the template does not run `serve`: {template:?}"
    );
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--admin-open-probes" => out.push(flag.clone()),
            "--listen" | "--admin-listen" | "--advertise-client" | "--advertise-admin"
            | "--data-dir" => {
                args.next();
            }
            "--name" | "--etcd" | "--config" | "--tls-cert" | "--tls-key" | "--tls-ca" => {
                let value = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("{flag} without a value"))?;
                let local = match flag.as_str() {
                    "--name" if value == "$(POD_NAME)" => pod_name(ordinal),
                    "--etcd" => value.clone(),
                    "--config" if value == "/etc/meridian/meridian.toml" => {
                        env.config.display().to_string()
                    }
                    "--tls-cert" if value.ends_with("/tls.crt") => env.cert.display().to_string(),
                    "--tls-key" if value.ends_with("/tls.key") => env.key.display().to_string(),
                    "--tls-ca" if value.ends_with("/ca.crt") => {
                        env.cert.with_file_name("ca.pem").display().to_string()
                    }
                    _ => anyhow::bail!("the sim cannot map {flag} {value}"),
                };
                out.extend([flag.clone(), local]);
            }
            other => anyhow::bail!("the sim does not know the member argument {other}"),
        }
    }
    out.extend(["--cores".into(), "1".into()]);
    Ok(out)
}

pub(super) fn start_member(
    env: &Env,
    ordinal: u32,
    port: u16,
    dir: &Path,
    template: &[String],
) -> anyhow::Result<ServerProcess> {
    std::fs::create_dir_all(dir)?;
    let args = member_args(template, env, ordinal)?;
    ServerProcess::start_with(&env.bin, dir, &format!("127.0.0.1:{port}"), &args)
}
