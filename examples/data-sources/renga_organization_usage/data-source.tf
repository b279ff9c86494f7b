data "renga_organization" "acme" {
  slug = "acme"
}

data "renga_organization_usage" "acme_november" {
  organization_id = data.renga_organization.acme.id
  from            = "2026-11-01"
  to              = "2026-11-30"
}

output "intake_gib" {
  value = data.renga_organization_usage.acme_november.totals.intake_bytes / 1073741824
}
