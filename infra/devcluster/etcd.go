package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs a single-member etcd inside this process. Its data lives in the data dir and
// fsync is off: this cluster is disposable, and fsync dominates write latency on CI disks.
func startEtcd(dataDir string) (*embed.Etcd, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "devcluster"
	cfg.Dir = filepath.Join(dataDir, "etcd")
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", clientPort))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dataDir, "etcd.log")}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd did not become ready in 60s")
	}
	return e, cu.String(), nil
}
