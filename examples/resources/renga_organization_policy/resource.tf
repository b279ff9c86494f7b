resource "renga_organization" "acme" {
  slug         = "acme"
  display_name = "Acme Corporation"
}

resource "renga_organization_policy" "acme" {
  organization_id = renga_organization.acme.id

  # Anything left out inherits the deployment's defaults.
  limits = {
    max_agents                 = 500
    max_users                  = 50
    observation_retention_days = 90
  }

  locked_settings = {
    require_sso           = true
    session_max_age_hours = 12
    allowed_email_domains = ["acme.example"]
  }

  entitlements = {
    jobs         = true
    owner_export = false
  }
}
