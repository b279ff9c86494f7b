# Two organizations and their policies on a development deployment (`make run`).
# See README.md in this directory.

terraform {
  required_providers {
    renga = {
      source = "renga/renga"
    }
  }
}

# url and token come from RENGA_URL and RENGA_OPERATOR_TOKEN.
provider "renga" {}

variable "owner_email" {
  description = "Who is invited to own Acme (the invitation mail lands under .renga/ in development)."
  type        = string
  default     = "olivia@acme.example"
}

data "renga_deployment" "this" {}

resource "renga_organization" "acme" {
  slug         = "acme"
  display_name = "Acme Corporation"
}

resource "renga_organization" "globex" {
  slug         = "globex"
  display_name = "Globex"
}

# Acme: a large customer with SSO enforced.
resource "renga_organization_policy" "acme" {
  organization_id = renga_organization.acme.id

  limits = {
    max_agents = 500
    max_users  = 50
  }

  locked_settings = {
    require_sso           = true
    allowed_email_domains = ["acme.example"]
  }
}

# Globex: a trial, with jobs switched off and a short retention.
resource "renga_organization_policy" "globex" {
  organization_id = renga_organization.globex.id

  limits = {
    max_agents                 = 10
    observation_retention_days = 14
  }

  entitlements = {
    jobs = false
  }
}

resource "renga_owner_invitation" "acme" {
  organization_id = renga_organization.acme.id
  email           = var.owner_email
}

output "organizations" {
  value = {
    (renga_organization.acme.slug)   = renga_organization.acme.id
    (renga_organization.globex.slug) = renga_organization.globex.id
  }
}

output "globex_max_users" {
  description = "Not set by Globex's policy: the deployment default applies."
  value       = data.renga_deployment.this.policy_defaults.limits.max_users
}
