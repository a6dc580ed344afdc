package rest

import (
	"encoding/binary"
	"net"

	"golang.org/x/sys/unix"
)

// socketOwner asks the kernel (sock_diag over netlink, as ss does) for the
// TCP socket at from connected to to, and returns its owner's uid. Only a
// client on this machine has its socket in this kernel. The lookup is by
// the exact address pair, so it costs the same however many sockets there
// are — a flood of connections must not make each accept slower.
func socketOwner(from, to *net.TCPAddr) (uint32, bool) {
	family, src, dst := uint8(unix.AF_INET), from.IP.To4(), to.IP.To4()
	if src == nil || dst == nil {
		family, src, dst = unix.AF_INET6, from.IP.To16(), to.IP.To16()
	}
	if src == nil || dst == nil {
		return 0, false
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	// struct nlmsghdr, then struct inet_diag_req_v2 (linux/inet_diag.h).
	req := make([]byte, unix.SizeofNlMsghdr+56)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	r := req[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 1<<unix.BPF_TCP_ESTABLISHED) // idiag_states
	id := r[8:]                                      // struct inet_diag_sockid
	binary.BigEndian.PutUint16(id[0:], uint16(from.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(to.Port))
	copy(id[4:20], src)
	copy(id[20:36], dst)
	ne.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false
	}
	buf := make([]byte, 512)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil || n < unix.SizeofNlMsghdr+72 || ne.Uint16(buf[4:]) != unix.SOCK_DIAG_BY_FAMILY {
		return 0, false // NLMSG_ERROR: no such socket here
	}
	// struct inet_diag_msg: idiag_uid at offset 64.
	return ne.Uint32(buf[unix.SizeofNlMsghdr+64:]), true
}
