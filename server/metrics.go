package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renga_http_requests_total", Help: "HTTP requests by operation and status.",
		}, []string{"operation", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "renga_http_request_duration_seconds", Help: "HTTP request latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"operation"}),
	}
	m.reg.MustRegister(m.requests, m.duration, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(operation string, status int, d time.Duration) {
	if operation == "" {
		operation = "none"
	}
	m.requests.WithLabelValues(operation, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(operation).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
