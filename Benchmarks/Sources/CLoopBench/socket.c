#define _GNU_SOURCE
#include "CLoopBench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

// Loopback TCP for the echo scenario: the client's connections and the Dispatch peer's listener.

static int set_no_delay(int fd) {
    int on = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
}

int cbench_tcp_listen_loopback(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int on = 1;
    struct sockaddr_in address = loopback(0);
    socklen_t length = sizeof address;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0
        || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 128) != 0
        || getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    *port = ntohs(address.sin_port);
    return fd;
}

int cbench_tcp_accept(int listener) {
    int fd;
    do {
        fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK ? CBENCH_WOULD_BLOCK : -1;
    }
    set_no_delay(fd);
    return fd;
}

int cbench_tcp_connect_loopback(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in address = loopback(port);
    int result;
    do {
        result = connect(fd, (struct sockaddr *)&address, sizeof address);
    } while (result != 0 && errno == EINTR);
    int flags = result == 0 ? fcntl(fd, F_GETFL) : -1;
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || set_no_delay(fd) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

long cbench_recv(int fd, void *buffer, unsigned long size) {
    ssize_t result;
    do {
        result = recv(fd, buffer, size, 0);
    } while (result < 0 && errno == EINTR);
    if (result < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK ? CBENCH_WOULD_BLOCK : -1;
    }
    return (long)result;
}

long cbench_send(int fd, const void *buffer, unsigned long size) {
    ssize_t result;
    do {
        result = send(fd, buffer, size, MSG_NOSIGNAL);
    } while (result < 0 && errno == EINTR);
    if (result < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK ? CBENCH_WOULD_BLOCK : -1;
    }
    return (long)result;
}

static int epoll_change(int epfd, int op, int fd, uint64_t token, bool writable) {
    struct epoll_event event = {.events = EPOLLIN | (writable ? EPOLLOUT : 0), .data = {.u64 = token}};
    return epoll_ctl(epfd, op, fd, &event);
}

int cbench_epoll_watch(int epfd, int fd, uint64_t token, bool writable) {
    return epoll_change(epfd, EPOLL_CTL_ADD, fd, token, writable);
}

int cbench_epoll_rewatch(int epfd, int fd, uint64_t token, bool writable) {
    return epoll_change(epfd, EPOLL_CTL_MOD, fd, token, writable);
}

int cbench_epoll_wait_ready(int epfd, cbench_ready_event *events, int capacity, int timeout_ms) {
    struct epoll_event ready[capacity];
    int count;
    do {
        count = epoll_wait(epfd, ready, capacity, timeout_ms);
    } while (count < 0 && errno == EINTR);
    for (int i = 0; i < count; i++) {
        events[i].token = ready[i].data.u64;
        events[i].readable = (ready[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) != 0;
        events[i].writable = (ready[i].events & EPOLLOUT) != 0;
    }
    return count;
}
