# The deployment's one support source: who the operator's support people are. Organizations'
# owners still decide, with support grants, whether support people may see their organization.
resource "renga_support_source" "this" {
  enabled              = true
  provider_id          = renga_identity_provider.corp.id
  allowed_emails       = ["alice@ops.example"]
  allowed_email_domain = "support.ops.example"
}

# The provider support people sign in with (its client secret: see renga_identity_provider).
resource "renga_identity_provider" "corp" {
  slug         = "ops"
  issuer       = "https://login.ops.example"
  display_name = "Ops"
  client_id    = "renga-support"
}
