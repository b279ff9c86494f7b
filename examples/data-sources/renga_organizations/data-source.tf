data "renga_organizations" "pending_deletion" {
  state = "deletion_pending"
}

output "purges" {
  value = { for o in data.renga_organizations.pending_deletion.organizations : o.slug => o.purge_after }
}
