data "renga_deployment" "this" {}

output "deletion_grace_period" {
  value = data.renga_deployment.this.deletion_grace_period
}

output "default_max_agents" {
  value = data.renga_deployment.this.policy_defaults.limits.max_agents
}
