package metrics

import "github.com/prometheus/client_golang/prometheus"

// DiskState is what the metrics read of the data directory's disk
// (disk.Monitor): why it cannot be written ("disk full: …", "disk error:
// …"), nil while it can.
type DiskState interface {
	Err() error
}

var descDiskOK = prometheus.NewDesc(Namespace+"_disk_ok", "1 while Mother can write her data directory, 0 while it is full or failing (she then stores no messages and starts no chicks).", nil, nil)

// WatchDisk sets where the disk's state is read from.
func (m *Metrics) WatchDisk(d DiskState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.disk = d
}

// diskErr is why the data directory cannot be written (nil: it can, or
// nothing watches it).
func (m *Metrics) diskErr() error {
	m.mu.Lock()
	d := m.disk
	m.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Err()
}

func (c *stateCollector) collectDisk(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	d := c.m.disk
	c.m.mu.Unlock()
	if d != nil {
		ch <- prometheus.MustNewConstMetric(descDiskOK, prometheus.GaugeValue, b2f(d.Err() == nil))
	}
}
