//! Drift: whether an owned object as the API server stores it is still what the operator wants.
//! Pure; the shell reads the objects, and applies again each one that is missing or differs.
//!
//! The rule is a subset check: every field the desired object sets must have the same value in
//! the observed one. Fields the observed object has beyond those are not drift: the API server
//! defaults many (`sessionAffinity`, `imagePullPolicy`, `targetPort`, a claim template's
//! `volumeMode`), and other controllers and people may add labels, annotations or entries of
//! their own, which a server-side apply with the operator's field manager leaves in place
//! anyway (counting them would re-apply on every pass and never converge, where an unchanged
//! cluster must cost no write). Chosen over comparing a hash of the desired objects alone
//! (what was done before), which sees only what the spec changed, never an object deleted or
//! edited behind the operator's back. A field the spec stops setting is caught too: every
//! object carries the hash of its own desired form (`resources::APPLIED_HASH_ANNOTATION`), so
//! any change of the desired object is a differing annotation.
//!
//! What counts as the same value:
//! - Maps: key by key, recursively; key order never matters.
//! - Lists Kubernetes merges by key (`listType=map`: containers, volumes, env, volume mounts,
//!   container and Service ports, owner references, ...): each desired element must match the
//!   observed element with the same key, wherever it is; elements others added stay, as the
//!   apply leaves them. Every other list is atomic (args, access modes, NetworkPolicy rules and
//!   their ports, claim templates, tolerations): the apply replaces it whole, so it must have
//!   the same length and match element by element. An argument or a NetworkPolicy rule
//!   appended by hand is drift, and is removed.
//! - Resource quantities (`requests`, `limits`, `sizeLimit`): by value, as the API server
//!   stores them canonicalised (`1024Mi` as `1Gi`, `0.5` as `500m`).
//! - An empty desired value (`""`, `0`, `{}`, `[]`, null) matches an absent field: the API
//!   server drops the zero values of such fields (an env var's `value: ""`). `false` is not
//!   among them: every boolean the operator sets or passes through from the spec is a pointer
//!   field the server keeps, and an absent boolean often means the permissive default
//!   (`allowPrivilegeEscalation`).
//! - The StatefulSet's `spec.replicas` is not compared: scaling moves it, one member at a
//!   time, through the `/scale` subresource, and an apply must not fight that.

use serde_json::Value;

use super::resources::{Object, Owned};

/// An owned object to apply again, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub object: Object,
    /// The first field that differs, as a path (`spec.template.spec.containers[meridian]
    /// .args[12]`); `None` when the object is missing.
    pub field: Option<String>,
}

impl Drift {
    pub fn missing(&self) -> bool {
        self.field.is_none()
    }

    /// Why it is applied, for the event.
    pub fn why(&self) -> String {
        match &self.field {
            None => "missing".into(),
            Some(f) => format!("{f} differs"),
        }
    }
}

/// The owned objects that are missing or differ from `owned`, in the order they are applied.
/// `observed` gives each as stored (`None`: missing).
pub fn drifted(owned: &Owned, observed: impl Fn(Object) -> Option<Value>) -> Vec<Drift> {
    Object::ALL
        .into_iter()
        .filter_map(|object| {
            let field = match (owned.value(object), observed(object)) {
                (_, None) => {
                    return Some(Drift {
                        object,
                        field: None,
                    })
                }
                (Ok(mut desired), Some(observed)) => {
                    // Scaling's to move (module doc), not the apply's to put back.
                    if object == Object::StatefulSet {
                        if let Some(spec) = desired.get_mut("spec").and_then(Value::as_object_mut) {
                            spec.remove("replicas");
                        }
                    }
                    first_difference(&desired, &observed)?
                }
                // Never for these types; were it so, the apply reports why.
                (Err(e), Some(_)) => format!("(not serializable: {e})"),
            };
            Some(Drift {
                object,
                field: Some(field),
            })
        })
        .collect()
}

/// The first field (a path) where `observed` does not have what `desired` sets; `None` when it
/// has every one (the rules are in the module doc).
pub fn first_difference(desired: &Value, observed: &Value) -> Option<String> {
    let mut path = Vec::new();
    differ(desired, Some(observed), &mut path).then(|| render(&path))
}

fn render(path: &[String]) -> String {
    let mut out = String::new();
    for part in path {
        if part.starts_with('[') {
            out.push_str(part);
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    if out.is_empty() {
        "(the object)".into()
    } else {
        out
    }
}

/// A map key as a path segment: label keys have dots and slashes, so they are quoted.
fn segment(key: &str) -> String {
    if key.contains(['.', '/']) {
        format!("[{key:?}]")
    } else {
        key.to_string()
    }
}

/// True when `observed` lacks something of `desired`; `path` is then left at that field.
fn differ(desired: &Value, observed: Option<&Value>, path: &mut Vec<String>) -> bool {
    let observed = match observed {
        None | Some(Value::Null) => return !empty(desired),
        Some(o) => o,
    };
    match desired {
        Value::Object(want) => {
            let Value::Object(have) = observed else {
                return true;
            };
            for (key, value) in want {
                path.push(segment(key));
                if differ(value, have.get(key), path) {
                    return true;
                }
                path.pop();
            }
            false
        }
        Value::Array(want) => {
            let Value::Array(have) = observed else {
                return true;
            };
            match merge_keys(path, want) {
                Some(keys) => want.iter().any(|element| {
                    let key =
                        |v: &Value| keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
                    let wanted = key(element);
                    path.push(format!(
                        "[{}]",
                        wanted
                            .iter()
                            .map(|k| match k {
                                Some(Value::String(s)) => s.clone(),
                                Some(v) => v.to_string(),
                                None => "-".into(),
                            })
                            .collect::<Vec<_>>()
                            .join("/")
                    ));
                    let found = have.iter().find(|h| key(h) == wanted);
                    let d = differ(element, found, path);
                    if !d {
                        path.pop();
                    }
                    d
                }),
                None => {
                    if want.len() != have.len() {
                        return true;
                    }
                    want.iter().zip(have).enumerate().any(|(i, (w, h))| {
                        path.push(format!("[{i}]"));
                        let d = differ(w, Some(h), path);
                        if !d {
                            path.pop();
                        }
                        d
                    })
                }
            }
        }
        Value::Number(want) => match observed {
            Value::Number(have) => want != have && want.as_f64() != have.as_f64(),
            _ => true,
        },
        Value::String(want) => match observed {
            Value::String(have) if want == have => false,
            Value::String(have) if is_quantity(path) => {
                match (quantity_nanos(want), quantity_nanos(have)) {
                    (Some(a), Some(b)) => a != b,
                    _ => true,
                }
            }
            _ => true,
        },
        Value::Bool(_) | Value::Null => desired != observed,
    }
}

/// Zero values, which the API server omits from fields that have them by default.
fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(_) => false,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The key fields of a list Kubernetes merges by key (`listType=map`) at the end of `path`,
/// `None` for an atomic list. Keys must be unique in `desired` for the lookup to mean anything;
/// if they are not, the list is compared as atomic.
fn merge_keys(path: &[String], desired: &[Value]) -> Option<&'static [&'static str]> {
    let field = path.last()?.as_str();
    let keys: &'static [&'static str] = match field {
        "containers" | "initContainers" | "volumes" | "env" | "imagePullSecrets" => &["name"],
        "volumeMounts" => &["mountPath"],
        "ownerReferences" => &["uid"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        // A NetworkPolicy rule's ports are atomic: an extra port there opens the fence.
        "ports" if path.iter().any(|p| p == "ingress" || p == "egress") => return None,
        "ports" if desired.iter().any(|p| p.get("containerPort").is_some()) => {
            &["containerPort", "protocol"]
        }
        "ports" => &["port", "protocol"],
        _ => return None,
    };
    let mut seen: Vec<Vec<Option<&Value>>> = Vec::new();
    for element in desired {
        let key: Vec<Option<&Value>> = keys.iter().map(|k| element.get(k)).collect();
        if seen.contains(&key) {
            return None;
        }
        seen.push(key);
    }
    Some(keys)
}

/// Resource quantities: the values of `requests` and `limits` maps, and `sizeLimit`.
fn is_quantity(path: &[String]) -> bool {
    let n = path.len();
    path.last().is_some_and(|p| p == "sizeLimit")
        || (n >= 2 && matches!(path[n - 2].as_str(), "requests" | "limits"))
}

/// A Kubernetes quantity (`10Gi`, `500m`, `1.5`, `2e3`) in units of 10⁻⁹, exactly; the API
/// server rounds anything finer up to that. `None` when it is no quantity or too large to
/// hold, and then the text is compared as it is.
pub fn quantity_nanos(q: &str) -> Option<i128> {
    let q = q.trim();
    let (negative, q) = match q.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, q.strip_prefix('+').unwrap_or(q)),
    };
    let number_len = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    // The number as digits and a power of ten.
    let digits = format!("{whole}{fraction}");
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut pow10 = -(fraction.len() as i32) + 9;
    let mut pow2 = 0u32;
    match suffix {
        "" => {}
        "n" => pow10 -= 9,
        "u" => pow10 -= 6,
        "m" => pow10 -= 3,
        "k" => pow10 += 3,
        "M" => pow10 += 6,
        "G" => pow10 += 9,
        "T" => pow10 += 12,
        "P" => pow10 += 15,
        "E" => pow10 += 18,
        "Ki" => pow2 = 10,
        "Mi" => pow2 = 20,
        "Gi" => pow2 = 30,
        "Ti" => pow2 = 40,
        "Pi" => pow2 = 50,
        "Ei" => pow2 = 60,
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let exponent: i32 = exponent.parse().ok()?;
            pow10 = pow10.checked_add(exponent)?;
        }
    }
    mantissa = mantissa.checked_mul(1i128.checked_shl(pow2)?)?;
    if pow10 >= 0 {
        mantissa = mantissa.checked_mul(10i128.checked_pow(pow10 as u32)?)?;
    } else {
        let divisor = 10i128.checked_pow(pow10.unsigned_abs())?;
        // Rounded up to the next 10⁻⁹, as the API server stores it.
        mantissa = (mantissa + divisor - 1) / divisor;
    }
    Some(if negative { -mantissa } else { mantissa })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::{MeridianCluster, MeridianClusterSpec};
    use crate::decide::resources;

    fn cluster() -> MeridianCluster {
        let mut mc = MeridianCluster::new(
            "pd",
            MeridianClusterSpec {
                replicas: 3,
                image: "meridian:1".into(),
                etcd_endpoints: vec!["http://etcd:2379".into()],
                tls_secret: Some("pd-tls".into()),
                ..MeridianClusterSpec::default()
            },
        );
        mc.metadata.namespace = Some("db".into());
        mc.metadata.uid = Some("uid-1".into());
        mc
    }

    /// Every owned object as applied, with what an API server adds on its own: defaults, a
    /// cluster IP, claim template fields, a status, and labels of other controllers.
    fn stored(owned: &Owned, object: Object) -> Value {
        let mut v = owned.value(object).unwrap();
        v["metadata"]["uid"] = json!("server-uid");
        v["metadata"]["resourceVersion"] = json!("7");
        v["metadata"]["labels"]["team"] = json!("db");
        match object {
            Object::ClientService | Object::PeerService | Object::AdminService => {
                v["spec"]["sessionAffinity"] = json!("None");
                v["spec"]["ipFamilies"] = json!(["IPv4"]);
                for port in v["spec"]["ports"].as_array_mut().unwrap() {
                    port["targetPort"] = port["port"].clone();
                }
            }
            Object::StatefulSet => {
                v["spec"]["revisionHistoryLimit"] = json!(10);
                let pod = &mut v["spec"]["template"]["spec"];
                pod["restartPolicy"] = json!("Always");
                pod["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
                pod["containers"][0]["livenessProbe"]["timeoutSeconds"] = json!(1);
                let claim = &mut v["spec"]["volumeClaimTemplates"][0];
                claim["apiVersion"] = json!("v1");
                claim["kind"] = json!("PersistentVolumeClaim");
                claim["spec"]["volumeMode"] = json!("Filesystem");
                claim["status"] = json!({"phase": "Pending"});
                v["status"] = json!({"replicas": 3, "updateRevision": "rev-1"});
            }
            _ => {}
        }
        v
    }

    #[test]
    fn an_object_as_the_api_server_stores_it_has_not_drifted() {
        let mc = cluster();
        let owned = resources::owned(&mc, 3, "ops");
        assert_eq!(drifted(&owned, |o| Some(stored(&owned, o))), vec![]);
        // Replicas are scaling's: a StatefulSet at another count has not drifted.
        let scaled = resources::owned(&mc, 5, "ops");
        assert_eq!(drifted(&owned, |o| Some(stored(&scaled, o))), vec![]);
    }

    #[test]
    fn a_deleted_object_is_missing_and_only_it_is_applied() {
        let owned = resources::owned(&cluster(), 3, "ops");
        let drift = drifted(&owned, |o| {
            (o != Object::PeerService).then(|| stored(&owned, o))
        });
        assert_eq!(
            drift,
            vec![Drift {
                object: Object::PeerService,
                field: None
            }]
        );
        assert_eq!(drift[0].why(), "missing");
    }

    #[test]
    fn an_edited_field_the_operator_sets_is_drift_with_its_path() {
        let owned = resources::owned(&cluster(), 3, "ops");
        let edited = |object: Object, edit: &dyn Fn(&mut Value)| {
            drifted(&owned, |o| {
                let mut v = stored(&owned, o);
                if o == object {
                    edit(&mut v);
                }
                Some(v)
            })
        };
        let one = |object, field: &str| {
            vec![Drift {
                object,
                field: Some(field.into()),
            }]
        };
        // A container argument changed by hand.
        let args = "spec.template.spec.containers[meridian].args[12]";
        assert_eq!(
            edited(Object::StatefulSet, &|v| {
                v["spec"]["template"]["spec"]["containers"][0]["args"][12] = json!("/tmp/x")
            }),
            one(Object::StatefulSet, args)
        );
        // One appended (the apply replaces the list whole, so it is removed).
        assert_eq!(
            edited(Object::StatefulSet, &|v| {
                v["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!("--insecure-no-client-auth"))
            }),
            one(
                Object::StatefulSet,
                "spec.template.spec.containers[meridian].args"
            )
        );
        // A label the operator sets, on the object.
        assert_eq!(
            edited(Object::StatefulSet, &|v| {
                v["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("someone")
            }),
            one(
                Object::StatefulSet,
                "metadata.labels[\"app.kubernetes.io/managed-by\"]"
            )
        );
        // A port removed from a Service; a port added to a rule of the NetworkPolicy.
        assert_eq!(
            edited(Object::PeerService, &|v| {
                v["spec"]["ports"].as_array_mut().unwrap().remove(2);
            }),
            one(Object::PeerService, "spec.ports[2380/TCP]")
        );
        assert_eq!(
            edited(Object::AdminNetworkPolicy, &|v| {
                v["spec"]["ingress"][0]["ports"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"port": 2380, "protocol": "TCP"}))
            }),
            one(Object::AdminNetworkPolicy, "spec.ingress[0].ports")
        );
        // The hash annotation removed, the config edited, the budget loosened.
        assert_eq!(
            edited(Object::ConfigMap, &|v| {
                v["data"]["meridian.toml"] = json!("[limits]\n");
            }),
            one(Object::ConfigMap, "data[\"meridian.toml\"]")
        );
        assert_eq!(
            edited(Object::DisruptionBudget, &|v| {
                v["spec"]["minAvailable"] = json!(1);
            }),
            one(Object::DisruptionBudget, "spec.minAvailable")
        );
        assert_eq!(
            edited(Object::ClientService, &|v| {
                v["metadata"]["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .clear();
            }),
            one(
                Object::ClientService,
                "metadata.annotations[\"meridian.io/applied-hash\"]"
            )
        );
    }

    #[test]
    fn a_spec_change_that_only_removes_a_field_is_drift_through_the_hash() {
        let mut mc = cluster();
        mc.spec.service_type = Some("LoadBalancer".into());
        let before = resources::owned(&mc, 3, "ops");
        mc.spec.service_type = None;
        let after = resources::owned(&mc, 3, "ops");
        let drift = drifted(&after, |o| Some(stored(&before, o)));
        assert_eq!(
            drift,
            vec![Drift {
                object: Object::ClientService,
                field: Some("metadata.annotations[\"meridian.io/applied-hash\"]".into()),
            }]
        );
    }

    #[test]
    fn fields_others_add_and_key_order_are_not_drift() {
        let desired = json!({
            "metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {
                "containers": [
                    {"name": "meridian", "env": [{"name": "X", "value": ""}, {"name": "Y", "value": "1"}]}
                ],
                "args": ["serve", "--x"],
            }
        });
        // Maps in another order, a sidecar and an env var injected before ours, an empty
        // value the server dropped, defaults added.
        let observed: Value = serde_json::from_str(
            r#"{
                "spec": {
                    "args": ["serve", "--x"],
                    "containers": [
                        {"name": "sidecar", "image": "proxy"},
                        {"env": [{"name": "INJECTED", "value": "z"}, {"name": "Y", "value": "1"},
                                 {"name": "X"}],
                         "imagePullPolicy": "Always", "name": "meridian"}
                    ]
                },
                "metadata": {"labels": {"b": "2", "other": "x", "a": "1"}, "uid": "u"}
            }"#,
        )
        .unwrap();
        assert_eq!(first_difference(&desired, &observed), None);
        // But an atomic list must keep its length, and a keyed element must be there.
        let mut shorter = observed.clone();
        shorter["spec"]["args"] = json!(["serve"]);
        assert_eq!(
            first_difference(&desired, &shorter).as_deref(),
            Some("spec.args")
        );
        let mut gone = observed.clone();
        gone["spec"]["containers"][1]["env"]
            .as_array_mut()
            .unwrap()
            .remove(1);
        assert_eq!(
            first_difference(&desired, &gone).as_deref(),
            Some("spec.containers[meridian].env[Y]")
        );
        // `false` is a value, not an absence.
        let strict = json!({"securityContext": {"allowPrivilegeEscalation": false}});
        assert_eq!(
            first_difference(&strict, &json!({"securityContext": {}})).as_deref(),
            Some("securityContext.allowPrivilegeEscalation")
        );
    }

    #[test]
    fn quantities_compare_by_value_as_the_api_server_normalizes_them() {
        for (a, b) in [
            ("1024Mi", "1Gi"),
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1e3", "1k"),
            ("1.5Gi", "1536Mi"),
            ("10Gi", "10Gi"),
            ("0.1n", "1n"),
            ("+2", "2"),
        ] {
            assert_eq!(quantity_nanos(a), quantity_nanos(b), "{a} = {b}");
            assert!(quantity_nanos(a).is_some(), "{a}");
        }
        for (a, b) in [("1Gi", "1G"), ("500m", "5"), ("10Gi", "20Gi")] {
            assert_ne!(quantity_nanos(a), quantity_nanos(b), "{a} != {b}");
        }
        for bad in ["", "Gi", "1.2.3", "1Xi", "1e", "abc"] {
            assert_eq!(quantity_nanos(bad), None, "{bad}");
        }
        let desired = json!({"resources": {"requests": {"memory": "1024Mi", "cpu": "0.5"}},
                             "emptyDir": {"sizeLimit": "1000M"}});
        let normalized = json!({"resources": {"requests": {"memory": "1Gi", "cpu": "500m"}},
                                "emptyDir": {"sizeLimit": "1G"}});
        assert_eq!(first_difference(&desired, &normalized), None);
        let changed = json!({"resources": {"requests": {"memory": "2Gi", "cpu": "500m"}},
                             "emptyDir": {"sizeLimit": "1G"}});
        assert_eq!(
            first_difference(&desired, &changed).as_deref(),
            Some("resources.requests.memory")
        );
        // Elsewhere, text is text: an env value "1.0" is not "1".
        assert!(first_difference(&json!({"value": "1"}), &json!({"value": "1.0"})).is_some());
    }
}
