//! Why PD refuses a rule, a rule list or a region label rule, in PD's words (its error codes
//! and messages, which clients and operators match on).

/// A refusal; `Display` is PD's `err.Error()`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// `ErrRuleContent`: a rule is malformed.
    #[error("[PD:placement:ErrRuleContent]invalid rule content, {0}")]
    Content(String),
    /// `ErrHexDecodingString`: a key is not hex.
    #[error("[PD:hex:ErrHexDecodingString]decode string {0} error")]
    Hex(String),
    /// `ErrBuildRuleList`: the rules together leave a range without a valid placement.
    #[error("[PD:placement:ErrBuildRuleList]build rule list failed, {0}")]
    BuildList(String),
    /// `ErrRegionRuleContent`: a region label rule is malformed.
    #[error("[PD:region:ErrRegionRuleContent]invalid region rule content, {0}")]
    LabelContent(String),
}

impl RuleError {
    pub fn content(why: impl Into<String>) -> RuleError {
        RuleError::Content(why.into())
    }

    /// Whether PD answers it 400 (the input is wrong) rather than 500.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            RuleError::Content(_) | RuleError::Hex(_) | RuleError::LabelContent(_)
        )
    }
}
