/*
 * docparse.h: strict readers of the JSON and SVG that ebb writes, for the
 * tests: each refuses what the format's rules refuse, so that a test that
 * reads a file also checks that it is well formed.
 */
#ifndef EBB_TEST_DOCPARSE_H
#define EBB_TEST_DOCPARSE_H

#include <stddef.h>

/* ---- JSON (RFC 8259) ---- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype type;
	double num;		/* J_NUM, J_BOOL (0 or 1) */
	char *str;		/* J_STR, unescaped */
	struct jv *item;	/* J_ARR, J_OBJ: the values */
	char **key;		/* J_OBJ: the keys */
	size_t n;
};

/* Parse text as one JSON value into *out. Returns 0, or -1 with a reason
 * and the byte offset in err. */
int json_parse(const char *text, struct jv *out, char *err, size_t errlen);

/* The member key of object o, or NULL. */
const struct jv *json_get(const struct jv *o, const char *key);

void json_free(struct jv *v);

/* ---- XML, as SVG uses it: elements, attributes, text, the declaration ---- */

struct xel {
	char *name;
	char **attr;		/* name, value, name, value, ... (unescaped) */
	size_t nattr;
	char *text;		/* the character data directly inside, unescaped */
	struct xel *child;
	size_t nchild;
};

/* Parse text as one XML document (one root element, every tag closed, each
 * attribute quoted once, entities known) into *root. Returns 0, or -1 with
 * a reason in err. */
int xml_parse(const char *text, struct xel *root, char *err, size_t errlen);

/* The value of attribute name of e, or NULL. */
const char *xml_attr(const struct xel *e, const char *name);

/* The first element below (or at) e whose id attribute is id, or NULL. */
const struct xel *xml_by_id(const struct xel *e, const char *id);

/* Whether some element's text below (or at) e contains needle. */
int xml_has_text(const struct xel *e, const char *needle);

void xml_free(struct xel *e);

#endif
