// Package flinkrest is Flink's OpenAPI description of its REST API, for
// tests: the contract test validates every request and response of
// gflink's endpoint against it, and the dashboard test serves the page
// through a Flink-shaped endpoint that answers only what the description
// has.
package flinkrest

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// spec is a copy of Flink's flink-rest-v1.yml (Apache 2.0), kept in the
// repository so that the tests run on any clean clone.
//
//go:embed flink-rest-v1.yml
var spec []byte

// Load returns the description ($GFLINK_REST_SPEC, if set, replaces the
// copy), with documented adjustments where the generated description and
// Flink's actual behaviour differ:
//
//   - the "operation" of AsynchronousOperationResult is a oneOf of three
//     objects that require no property, so every body matches all three and
//     a strict oneOf can never pass: Flink's generator meant anyOf;
//   - CheckpointConfigInfo's "mode" is written lower case by Flink
//     ("exactly_once"), while the description lists the enum's upper-case
//     names; gflink sends what Flink sends;
//   - MetricCollectionResponseBody and AggregatedMetricsResponseBody are
//     described as objects, but Flink's serializers write bare arrays
//     ([{"id": …, "value": …}], MetricCollectionResponseBody.Serializer),
//     which is what its web dashboard and every client read.
//
// The router finds an operation by a request's method and path.
func Load() (*openapi3.T, routers.Router, error) {
	data, name := spec, "flink-rest-v1.yml"
	if p := os.Getenv("GFLINK_REST_SPEC"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		data, name = b, p
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", name, err)
	}
	op := doc.Components.Schemas["AsynchronousOperationResult"].Value.Properties["operation"].Value
	op.AnyOf, op.OneOf = op.OneOf, nil
	mode := doc.Components.Schemas["ProcessingMode"].Value
	mode.Enum = append(mode.Enum, "at_least_once", "exactly_once")
	metric := doc.Components.Schemas["Metric"]
	*doc.Components.Schemas["MetricCollectionResponseBody"].Value = openapi3.Schema{
		Type: &openapi3.Types{openapi3.TypeArray}, Items: metric}
	num := &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeNumber}}}
	*doc.Components.Schemas["AggregatedMetricsResponseBody"].Value = openapi3.Schema{
		Type: &openapi3.Types{openapi3.TypeArray}, Items: &openapi3.SchemaRef{Value: &openapi3.Schema{
			Type: &openapi3.Types{openapi3.TypeObject}, Required: []string{"id"}, AdditionalProperties: openapi3.AdditionalProperties{Has: new(bool)},
			Properties: openapi3.Schemas{"id": &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeString}}},
				"min": num, "max": num, "avg": num, "sum": num, "skew": num}}}}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, nil, err
	}
	return doc, router, nil
}

// Prune returns v (a decoded JSON value) with every object property the
// schema does not describe removed, recursively: what an endpoint that
// knows only the description's fields would send. A discriminator picks
// the schema of its value (a completed checkpoint's has external_path);
// objects whose schema allows any property (a map) keep their keys, pruned
// by the value schema.
func Prune(doc *openapi3.T, s *openapi3.SchemaRef, v any) any {
	if s == nil || s.Value == nil {
		return v
	}
	sc := flatten(s.Value)
	switch x := v.(type) {
	case map[string]any:
		if d := sc.Discriminator; d != nil {
			if name, ok := x[d.PropertyName].(string); ok {
				if m, ok := d.Mapping[name]; ok {
					if sub := doc.Components.Schemas[strings.TrimPrefix(m.Ref, "#/components/schemas/")]; sub != nil && sub.Value != nil {
						sc = merge(sc, flatten(sub.Value))
					}
				}
			}
		}
		if len(sc.Properties) == 0 && sc.AdditionalProperties.Schema == nil {
			return x // a free-form object
		}
		out := map[string]any{}
		for k, val := range x {
			if p, ok := sc.Properties[k]; ok {
				out[k] = Prune(doc, p, val)
			} else if ap := sc.AdditionalProperties; ap.Schema != nil {
				out[k] = Prune(doc, ap.Schema, val)
			} else if ap.Has != nil && *ap.Has {
				out[k] = val
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Prune(doc, sc.Items, e)
		}
		return out
	}
	return v
}

// flatten is a schema with the properties of its compositions: what any
// of them describes may be sent.
func flatten(sc *openapi3.Schema) *openapi3.Schema {
	for _, alt := range append(append(openapi3.SchemaRefs{}, sc.AllOf...), append(sc.AnyOf, sc.OneOf...)...) {
		if alt.Value != nil {
			sc = merge(sc, flatten(alt.Value))
		}
	}
	return sc
}

// merge is a schema with the properties of both.
func merge(a, b *openapi3.Schema) *openapi3.Schema {
	m := *a
	m.Properties = openapi3.Schemas{}
	for k, v := range a.Properties {
		m.Properties[k] = v
	}
	for k, v := range b.Properties {
		m.Properties[k] = v
	}
	if m.Items == nil {
		m.Items = b.Items
	}
	if m.AdditionalProperties.Schema == nil && m.AdditionalProperties.Has == nil {
		m.AdditionalProperties = b.AdditionalProperties
	}
	if m.Discriminator == nil {
		m.Discriminator = b.Discriminator
	}
	return &m
}
