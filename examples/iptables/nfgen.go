package iptables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// genConn asks nf_tables for the generation of one namespace's ruleset:
// a counter the kernel moves by one for every transaction that changes
// something (one per COMMIT of an iptables-restore on nf_tables).
type genConn struct{ c *netlink.Conn }

// dialGen opens a netfilter socket in the namespace of the file nsFD (0:
// the process's own).
func dialGen(nsFD int) (*genConn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, err
	}
	return &genConn{c: c}, nil
}

func (g *genConn) Close() error { return g.c.Close() }

// nftGenType is the message type of a generation request and reply.
const (
	nftGetGen = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN)
	nftNewGen = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN)
)

// generation returns the ruleset's generation.
func (g *genConn) generation() (uint32, error) {
	msgs, err := g.c.Execute(netlink.Message{
		Header: netlink.Header{Type: nftGetGen, Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, // nfgenmsg
	})
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	if len(msgs) != 1 {
		return 0, fmt.Errorf("nf_tables generation: %d replies, want 1", len(msgs))
	}
	return parseGen(msgs[0])
}

// barrierTimeout bounds the wait for the kernel's answer to barrier.
const barrierTimeout = 2 * time.Second

// barrier returns once no transaction is being committed. A transaction
// holds nf_tables' commit mutex from the moment it moves the generation
// until its notifications are sent; an empty batch takes that mutex too,
// and commits nothing (the generation stays).
func (g *genConn) barrier() error {
	res := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES} // res_id, big-endian
	sent, err := g.c.SendMessages([]netlink.Message{
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN), Flags: netlink.Request}, Data: res},
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_END), Flags: netlink.Request | netlink.Acknowledge}, Data: res},
	})
	if err != nil {
		return fmt.Errorf("nf_tables barrier: %w", err)
	}
	if err := g.c.SetReadDeadline(time.Now().Add(barrierTimeout)); err != nil {
		return fmt.Errorf("nf_tables barrier: %w", err)
	}
	defer g.c.SetReadDeadline(time.Time{})
	for {
		msgs, err := g.c.Receive()
		if err != nil {
			return fmt.Errorf("nf_tables barrier: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type == netlink.Error && m.Header.Sequence == sent[1].Header.Sequence {
				return nil // the batch's end acknowledged
			}
		}
	}
}

var errNoGenID = errors.New("nf_tables generation: the reply has no generation ID")

// parseGen reads the generation ID of a NEWGEN message.
func parseGen(m netlink.Message) (uint32, error) {
	if m.Header.Type != nftNewGen {
		return 0, fmt.Errorf("nf_tables generation: reply of type %#x, want %#x", uint16(m.Header.Type), uint16(nftNewGen))
	}
	if len(m.Data) < 4 {
		return 0, fmt.Errorf("nf_tables generation: reply of %d bytes, shorter than its header", len(m.Data))
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	var id uint32
	found := false
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_ID {
			id, found = ad.Uint32(), true
		}
	}
	if err := ad.Err(); err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	if !found {
		return 0, errNoGenID
	}
	return id, nil
}
