/* frisbee -M: where an image master says the image is. */
#ifndef FRISBEE_MASTER_H
#define FRISBEE_MASTER_H

#include <stdint.h>

struct master_answer {
	char group[16];                /* dotted multicast address */
	uint16_t port;
	uint32_t server;               /* network order; 0: not known */
	uint8_t uuid[16];              /* the image's */
	uint64_t source_bytes;         /* what it restores, as the master says */
};

/*
 * ask_master - ask the master at spec (HOST[:PORT]) for image name; dies with a
 * clear message when there is no answer or the master refuses.
 */
void ask_master(const char *spec, const char *name, struct master_answer *a);

#endif
