package provider_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"renga.dev/renga/provider/internal/provider"
)

// Every schema, attribute and nested attribute has a MarkdownDescription: tfplugindocs builds
// the reference from them.
func TestEveryAttributeIsDescribed(t *testing.T) {
	ctx := context.Background()
	p := provider.New("test")()
	var ps fwprovider.SchemaResponse
	p.Schema(ctx, fwprovider.SchemaRequest{}, &ps)
	if ps.Schema.MarkdownDescription == "" {
		t.Error("the provider has no description")
	}
	for name, a := range ps.Schema.Attributes {
		if a.GetMarkdownDescription() == "" {
			t.Errorf("provider.%s has no description", name)
		}
	}
	for _, newResource := range p.Resources(ctx) {
		r := newResource()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "renga"}, &meta)
		var s resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &s)
		if s.Diagnostics.HasError() || s.Schema.MarkdownDescription == "" {
			t.Errorf("%s: no description (%v)", meta.TypeName, s.Diagnostics)
		}
		checkResource(t, meta.TypeName, s.Schema.Attributes)
	}
	for _, newDataSource := range p.DataSources(ctx) {
		d := newDataSource()
		var meta datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "renga"}, &meta)
		var s datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &s)
		if s.Diagnostics.HasError() || s.Schema.MarkdownDescription == "" {
			t.Errorf("data.%s: no description (%v)", meta.TypeName, s.Diagnostics)
		}
		checkDataSource(t, "data."+meta.TypeName, s.Schema.Attributes)
	}
}

func checkResource(t *testing.T, at string, attrs map[string]rschema.Attribute) {
	t.Helper()
	for name, a := range attrs {
		if a.GetMarkdownDescription() == "" {
			t.Errorf("%s.%s has no description", at, name)
		}
		switch n := a.(type) {
		case rschema.SingleNestedAttribute:
			checkResource(t, at+"."+name, n.Attributes)
		case rschema.ListNestedAttribute:
			checkResource(t, at+"."+name, n.NestedObject.Attributes)
		}
	}
}

func checkDataSource(t *testing.T, at string, attrs map[string]dschema.Attribute) {
	t.Helper()
	for name, a := range attrs {
		if a.GetMarkdownDescription() == "" {
			t.Errorf("%s.%s has no description", at, name)
		}
		switch n := a.(type) {
		case dschema.SingleNestedAttribute:
			checkDataSource(t, at+"."+name, n.Attributes)
		case dschema.ListNestedAttribute:
			checkDataSource(t, at+"."+name, n.NestedObject.Attributes)
		}
	}
}
