# The client secret never reaches Terraform's state or plan: an ephemeral variable keeps it out
# of every file too (set it with TF_VAR_corp_client_secret, or -var).
variable "corp_client_secret" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "renga_identity_provider" "corp" {
  slug                  = "corp"
  issuer                = "https://login.example.com"
  display_name          = "Example Corp"
  client_id             = "renga"
  scopes                = ["openid", "email", "profile"]
  allowed_email_domains = ["example.com"]

  client_secret_wo = var.corp_client_secret
  # Change (e.g. increment) after rotating the secret at the provider: the new one is sent then.
  client_secret_wo_version = 1
}

# Each write is a pending revision: test it to activate it (a person opens the printed URL).
output "test_it" {
  value = "renga identity-provider test ${renga_identity_provider.corp.id}"
}
