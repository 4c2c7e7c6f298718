package kafka

// Topic configs (docs/kafka.md, "Topic configs"): DescribeConfigs,
// AlterConfigs and IncrementalAlterConfigs over lakegate's policies.
// retention.ms and retention.bytes are the topic's retention policy (the
// one `pulsar-admin topics set-retention` sets): Kafka topics are created
// with Kafka's default (7 days, no size limit) rather than Pulsar's 0/0,
// under which a topic without subscriptions keeps nothing. The other
// configs described are fixed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// Settable topic configs.
const (
	cfgRetentionMs    = "retention.ms"
	cfgRetentionBytes = "retention.bytes"
)

// kafkaDefaultRetentionMs is Kafka's log.retention.hours (168).
const kafkaDefaultRetentionMs = 7 * 24 * 3600 * 1000

// retention is a topic's retention in Kafka's terms (−1: no limit).
type retention struct {
	ms, bytes int64
}

func defaultRetention() retention { return retention{ms: kafkaDefaultRetentionMs, bytes: -1} }

// policy is the retention as lakegate's policy: minutes and MiB, rounded
// up (a limit never shrinks in the mapping), −1 kept.
func (r retention) policy() broker.RetentionPolicy {
	p := broker.RetentionPolicy{TimeMinutes: -1, SizeMB: -1}
	if r.ms >= 0 {
		p.TimeMinutes = (r.ms + 59_999) / 60_000
	}
	if r.bytes >= 0 {
		p.SizeMB = (r.bytes + 1<<20 - 1) >> 20
	}
	return p
}

// retentionOf is a retention policy in Kafka's terms.
func retentionOf(p broker.RetentionPolicy) retention {
	r := retention{ms: -1, bytes: -1}
	if p.TimeMinutes >= 0 {
		r.ms = p.TimeMinutes * 60_000
	}
	if p.SizeMB >= 0 {
		r.bytes = p.SizeMB << 20
	}
	return r
}

// kafkaTopicProps are the stream properties of a topic the Kafka listener
// creates.
func kafkaTopicProps(r retention) map[string]string {
	v, _ := json.Marshal(r.policy())
	return map[string]string{broker.RetentionProperty: string(v)}
}

// setConfig applies one config to a retention; kerr.InvalidConfig for a
// config lakegate does not set, or a bad value.
func (r *retention) setConfig(name string, value *string) error {
	var target *int64
	switch name {
	case cfgRetentionMs:
		target = &r.ms
	case cfgRetentionBytes:
		target = &r.bytes
	default:
		return fmt.Errorf("%w: %s cannot be set on lakegate (settable: %s, %s; other settings are lakegate's policies: docs/kafka.md)", kerr.InvalidConfig, name, cfgRetentionMs, cfgRetentionBytes)
	}
	if value == nil { // back to the default
		*target = map[string]int64{cfgRetentionMs: kafkaDefaultRetentionMs, cfgRetentionBytes: -1}[name]
		return nil
	}
	v, err := strconv.ParseInt(*value, 10, 64)
	if err != nil || v < -1 {
		return fmt.Errorf("%w: %s=%q: want -1 or a number of %s", kerr.InvalidConfig, name, *value, map[string]string{cfgRetentionMs: "milliseconds", cfgRetentionBytes: "bytes"}[name])
	}
	*target = v
	return nil
}

// createConfigs reads a CreateTopics topic's configs.
func createConfigs(cs []kmsg.CreateTopicsRequestTopicConfig) (retention, error) {
	r := defaultRetention()
	for _, c := range cs {
		if err := r.setConfig(c.Name, c.Value); err != nil {
			return r, err
		}
	}
	return r, nil
}

// topicConfigs are a topic's configs as Kafka names them: the retention
// (from its policy, dynamic when the topic has its own) and fixed ones.
func (s *Server) topicConfigs(ctx context.Context, topic string) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	md, err := s.loadTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	pol, err := s.cfg.Broker.PoliciesOf(ctx, md)
	if err != nil {
		return nil, err
	}
	r := retentionOf(*pol.Retention)
	src := kmsg.ConfigSourceDefaultConfig
	if _, own := md.Properties[broker.RetentionProperty]; own {
		src = kmsg.ConfigSourceDynamicTopicConfig
	}
	cfg := func(name, value string, source kmsg.ConfigSource, readOnly bool) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source, c.ReadOnly = name, kmsg.StringPtr(value), source, readOnly
		return c
	}
	return []kmsg.DescribeConfigsResponseResourceConfig{
		cfg(cfgRetentionMs, strconv.FormatInt(r.ms, 10), src, false),
		cfg(cfgRetentionBytes, strconv.FormatInt(r.bytes, 10), src, false),
		cfg("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig, true),
		cfg("max.message.bytes", strconv.Itoa(defaultMaxMessageSize), kmsg.ConfigSourceDefaultConfig, true),
		cfg("message.timestamp.type", "CreateTime", kmsg.ConfigSourceDefaultConfig, true),
		cfg("min.insync.replicas", "1", kmsg.ConfigSourceDefaultConfig, true),
	}, nil
}

// loadTopic reads a Kafka topic's stream.
func (s *Server) loadTopic(ctx context.Context, topic string) (lakestream.StreamMetadata, error) {
	if !validTopic(topic) {
		return lakestream.StreamMetadata{}, kerr.InvalidTopicException
	}
	tn, _ := broker.ParseTopicName(s.pulsarName(topic))
	md, err := s.cfg.Catalog.LoadStream(ctx, broker.FullStreamID(tn))
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		return md, kerr.UnknownTopicOrPartition
	}
	return md, err
}

func handleDescribeConfigs(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.DescribeConfigsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		var cfgs []kmsg.DescribeConfigsResponseResourceConfig
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			err := c.authorize(ctx, rr.ResourceName, broker.ActionLookup)
			if err == nil {
				cfgs, err = s.topicConfigs(ctx, rr.ResourceName)
			}
			if err != nil {
				out.ErrorCode, out.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly, c.Source = "auto.create.topics.enable", kmsg.StringPtr(strconv.FormatBool(s.cfg.AutoCreate)), true, kmsg.ConfigSourceStaticBrokerConfig
			cfgs = append(cfgs, c)
		default:
			out.ErrorCode = kerr.InvalidRequest.Code
		}
		for _, cfg := range cfgs {
			if rr.ConfigNames == nil || contains(rr.ConfigNames, cfg.Name) {
				out.Configs = append(out.Configs, cfg)
			}
		}
		resp.Resources = append(resp.Resources, out)
	}
	a.set(resp)
}

// alterRetention changes a topic's retention: change edits the current one
// (the topic's own, else Kafka's default); the policy is written with
// optimistic concurrency.
func (s *Server) alterRetention(ctx context.Context, c *conn, resource kmsg.ConfigResourceType, topic string, validateOnly bool, change func(*retention) error) error {
	if resource != kmsg.ConfigResourceTypeTopic {
		return fmt.Errorf("%w: only topic configs are set here (the node's are its configuration file)", kerr.InvalidRequest)
	}
	if err := c.authorizeAdmin(ctx); err != nil {
		return err
	}
	for range 5 {
		md, err := s.loadTopic(ctx, topic)
		if err != nil {
			return err
		}
		r := defaultRetention()
		if v, ok := md.Properties[broker.RetentionProperty]; ok {
			if p, err := broker.ParseRetention(v); err == nil {
				r = retentionOf(*p)
			}
		}
		if err := change(&r); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		maps.Copy(props, kafkaTopicProps(r))
		if _, ok, err := s.cfg.Catalog.ReplaceStreamProperties(ctx, md.ID, props, md.MetadataVersion); err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: the topic's properties changed concurrently: retry", kerr.ConcurrentTransactions)
}

func handleAlterConfigs(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.AlterConfigsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		// AlterConfigs replaces every dynamic config: what is not named
		// goes back to its default.
		err := s.alterRetention(ctx, c, rr.ResourceType, rr.ResourceName, r.ValidateOnly, func(ret *retention) error {
			*ret = defaultRetention()
			for _, cfg := range rr.Configs {
				if err := ret.setConfig(cfg.Name, cfg.Value); err != nil {
					return err
				}
			}
			return nil
		})
		out.ErrorCode = errCode(err)
		if err != nil {
			out.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		resp.Resources = append(resp.Resources, out)
	}
	a.set(resp)
}

func handleIncrementalAlterConfigs(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.alterRetention(ctx, c, rr.ResourceType, rr.ResourceName, r.ValidateOnly, func(ret *retention) error {
			for _, cfg := range rr.Configs {
				value := cfg.Value
				switch cfg.Op {
				case kmsg.IncrementalAlterConfigOpSet:
				case kmsg.IncrementalAlterConfigOpDelete:
					value = nil // back to the default
				default:
					return fmt.Errorf("%w: %s of %s: only SET and DELETE (no list configs here)", kerr.InvalidConfig, cfg.Op, cfg.Name)
				}
				if err := ret.setConfig(cfg.Name, value); err != nil {
					return err
				}
			}
			return nil
		})
		out.ErrorCode = errCode(err)
		if err != nil {
			out.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		resp.Resources = append(resp.Resources, out)
	}
	a.set(resp)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
