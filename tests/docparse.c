/*
 * docparse.c: strict JSON and XML readers for the tests (docparse.h).
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docparse.h"

/* A parse: where it is, and the first error. */
struct rd {
	const char *s, *p;
	char *err;
	size_t errlen;
	int failed;
	int depth;
};

static int
fail(struct rd *r, const char *fmt, ...)
{
	if (!r->failed) {
		va_list ap;
		int n = snprintf(r->err, r->errlen, "at byte %ld: ", (long)(r->p - r->s));
		va_start(ap, fmt);
		if (n >= 0 && (size_t)n < r->errlen)
			vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
		va_end(ap);
		r->failed = 1;
	}
	return -1;
}

static void
skip_ws(struct rd *r)
{
	while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
		r->p++;
}

/* ---- JSON ---- */

static int json_value(struct rd *r, struct jv *v);

/* A JSON string at r->p (at its quote) into *out. */
static int
json_string(struct rd *r, char **out)
{
	size_t cap = 16, n = 0;
	char *s = malloc(cap);

	if (s == NULL || *r->p != '"')
		return free(s), fail(r, "a string expected");
	r->p++;
	for (;;) {
		unsigned char c = (unsigned char)*r->p;
		if (c == '\0' || c < 0x20) {
			free(s);
			return fail(r, c ? "a control character in a string" : "a string not closed");
		}
		r->p++;
		if (c == '"')
			break;
		if (c == '\\') {
			char e = *r->p++;
			const char *esc = strchr("\"\\/bfnrt", e);
			if (e == 'u') {
				for (int i = 0; i < 4; i++)
					if (!isxdigit((unsigned char)r->p[i])) {
						free(s);
						return fail(r, "a bad \\u escape");
					}
				unsigned long u = strtoul((char[5]){ r->p[0], r->p[1], r->p[2], r->p[3], 0 },
				    NULL, 16);
				r->p += 4;
				c = u < 0x80 ? (unsigned char)u : '?';
			} else if (esc != NULL && e != '\0') {
				c = (unsigned char)"\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
			} else {
				free(s);
				return fail(r, "a bad escape");
			}
		}
		if (n + 2 > cap) {
			char *ns = realloc(s, cap *= 2);
			if (ns == NULL)
				return free(s), fail(r, "out of memory");
			s = ns;
		}
		s[n++] = (char)c;
	}
	s[n] = '\0';
	*out = s;
	return 0;
}

/* A JSON number, strictly as the grammar has it. */
static int
json_number(struct rd *r, struct jv *v)
{
	const char *q = r->p;

	if (*q == '-')
		q++;
	if (*q == '0')
		q++;
	else if (*q >= '1' && *q <= '9')
		while (isdigit((unsigned char)*q))
			q++;
	else
		return fail(r, "a value expected");
	if (*q == '.') {
		if (!isdigit((unsigned char)*++q))
			return fail(r, "a digit after '.' expected");
		while (isdigit((unsigned char)*q))
			q++;
	}
	if (*q == 'e' || *q == 'E') {
		q++;
		if (*q == '+' || *q == '-')
			q++;
		if (!isdigit((unsigned char)*q))
			return fail(r, "an exponent expected");
		while (isdigit((unsigned char)*q))
			q++;
	}
	v->type = J_NUM;
	v->num = strtod(r->p, NULL);
	r->p = q;
	return 0;
}

/* The items of an array or the members of an object, r->p after its bracket. */
static int
json_items(struct rd *r, struct jv *v, int obj)
{
	size_t cap = 0;

	v->type = obj ? J_OBJ : J_ARR;
	skip_ws(r);
	if (*r->p == (obj ? '}' : ']')) {
		r->p++;
		return 0;
	}
	for (;;) {
		if (v->n == cap) {
			cap = cap ? cap * 2 : 8;
			struct jv *ni = realloc(v->item, cap * sizeof *ni);
			char **nk = obj ? realloc(v->key, cap * sizeof *nk) : NULL;
			if (ni != NULL)
				v->item = ni;
			if (nk != NULL)
				v->key = nk;
			if (ni == NULL || (obj && nk == NULL))
				return fail(r, "out of memory");
		}
		memset(&v->item[v->n], 0, sizeof v->item[0]);
		skip_ws(r);
		if (obj) {
			v->key[v->n] = NULL;
			if (json_string(r, &v->key[v->n]) < 0)
				return v->n++, -1;
			skip_ws(r);
			if (*r->p++ != ':')
				return v->n++, fail(r, "':' expected");
		}
		int rc = json_value(r, &v->item[v->n]);
		v->n++;
		if (rc < 0)
			return -1;
		skip_ws(r);
		if (*r->p == ',') {
			r->p++;
			continue;
		}
		if (*r->p++ == (obj ? '}' : ']'))
			return 0;
		return fail(r, obj ? "',' or '}' expected" : "',' or ']' expected");
	}
}

static int
json_value(struct rd *r, struct jv *v)
{
	skip_ws(r);
	if (++r->depth > 64)
		return fail(r, "nested too deeply");
	int rc;
	if (*r->p == '{' || *r->p == '[') {
		int obj = *r->p++ == '{';
		rc = json_items(r, v, obj);
	} else if (*r->p == '"') {
		v->type = J_STR;
		rc = json_string(r, &v->str);
	} else if (strncmp(r->p, "true", 4) == 0 || strncmp(r->p, "null", 4) == 0) {
		v->type = r->p[0] == 't' ? J_BOOL : J_NULL;
		v->num = 1;
		r->p += 4;
		rc = 0;
	} else if (strncmp(r->p, "false", 5) == 0) {
		v->type = J_BOOL;
		r->p += 5;
		rc = 0;
	} else {
		rc = json_number(r, v);
	}
	r->depth--;
	return rc;
}

int
json_parse(const char *text, struct jv *out, char *err, size_t errlen)
{
	struct rd r = { .s = text, .p = text, .err = err, .errlen = errlen };

	memset(out, 0, sizeof *out);
	if (json_value(&r, out) < 0)
		return -1;
	skip_ws(&r);
	if (*r.p != '\0')
		return fail(&r, "text after the value");
	return 0;
}

const struct jv *
json_get(const struct jv *o, const char *key)
{
	if (o == NULL || o->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->key[i], key) == 0)
			return &o->item[i];
	return NULL;
}

void
json_free(struct jv *v)
{
	for (size_t i = 0; i < v->n; i++) {
		json_free(&v->item[i]);
		if (v->key != NULL)
			free(v->key[i]);
	}
	free(v->item);
	free(v->key);
	free(v->str);
	memset(v, 0, sizeof *v);
}

/* ---- XML ---- */

/* Character data or an attribute's value up to stop, entities decoded. */
static char *
xml_chars(struct rd *r, const char *stop)
{
	size_t cap = 16, n = 0;
	char *s = malloc(cap);

	while (s != NULL && *r->p != '\0' && strchr(stop, *r->p) == NULL) {
		char c = *r->p++;
		if (c == '&') {
			static const char *const ent[][2] = { { "amp;", "&" }, { "lt;", "<" },
				{ "gt;", ">" }, { "quot;", "\"" }, { "apos;", "'" } };
			size_t k = 0;
			while (k < 5 && strncmp(r->p, ent[k][0], strlen(ent[k][0])) != 0)
				k++;
			if (k == 5) {
				free(s);
				fail(r, "an unknown entity");
				return NULL;
			}
			r->p += strlen(ent[k][0]);
			c = ent[k][1][0];
		} else if (c == '<') {
			free(s);
			fail(r, "'<' in a value");
			return NULL;
		}
		if (n + 2 > cap) {
			char *ns = realloc(s, cap *= 2);
			if (ns == NULL) {
				free(s);
				return NULL;
			}
			s = ns;
		}
		s[n++] = c;
	}
	if (s != NULL)
		s[n] = '\0';
	else
		fail(r, "out of memory");
	return s;
}

static int
is_name(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == ':' || c == '.';
}

/* A name at r->p, copied. */
static char *
xml_name(struct rd *r)
{
	const char *q = r->p;

	while (is_name(*q))
		q++;
	if (q == r->p) {
		fail(r, "a name expected");
		return NULL;
	}
	char *s = strndup(r->p, (size_t)(q - r->p));
	r->p = q;
	return s;
}

/* One element, r->p at its '<'. */
static int
xml_element(struct rd *r, struct xel *e)
{
	if (*r->p != '<' || ++r->depth > 64)
		return fail(r, "an element expected");
	r->p++;
	if ((e->name = xml_name(r)) == NULL)
		return -1;
	for (;;) {
		skip_ws(r);
		if (*r->p == '/' || *r->p == '>')
			break;
		char *an = xml_name(r);
		if (an == NULL)
			return -1;
		for (size_t i = 0; i < e->nattr; i++)
			if (strcmp(e->attr[2 * i], an) == 0)
				return free(an), fail(r, "attribute %s twice", e->attr[2 * i]);
		char **na = realloc(e->attr, (e->nattr + 1) * 2 * sizeof *na);
		if (na == NULL)
			return free(an), fail(r, "out of memory");
		e->attr = na;
		e->attr[2 * e->nattr] = an;
		e->attr[2 * e->nattr + 1] = NULL;
		e->nattr++;
		if (*r->p++ != '=' || (*r->p != '"' && *r->p != '\''))
			return fail(r, "attribute %s without a quoted value", an);
		char q[2] = { *r->p++, 0 };
		if ((e->attr[2 * e->nattr - 1] = xml_chars(r, q)) == NULL)
			return -1;
		if (*r->p++ != q[0])
			return fail(r, "attribute %s not closed", an);
	}
	if (*r->p == '/') {
		if (r->p[1] != '>')
			return fail(r, "'/>' expected");
		r->p += 2;
		r->depth--;
		return 0;
	}
	r->p++;
	e->text = strdup("");
	for (;;) {
		char *t = xml_chars(r, "<");
		if (t == NULL || e->text == NULL)
			return free(t), -1;
		char *nt = malloc(strlen(e->text) + strlen(t) + 1);
		if (nt == NULL)
			return free(t), fail(r, "out of memory");
		strcat(strcpy(nt, e->text), t);
		free(e->text);
		free(t);
		e->text = nt;
		if (*r->p == '\0')
			return fail(r, "element %s not closed", e->name);
		if (r->p[1] == '/')
			break;
		struct xel *nc = realloc(e->child, (e->nchild + 1) * sizeof *nc);
		if (nc == NULL)
			return fail(r, "out of memory");
		e->child = nc;
		memset(&e->child[e->nchild], 0, sizeof *nc);
		if (xml_element(r, &e->child[e->nchild++]) < 0)
			return -1;
	}
	r->p += 2;
	size_t len = strlen(e->name);
	if (strncmp(r->p, e->name, len) != 0 || r->p[len] != '>')
		return fail(r, "</%s> expected", e->name);
	r->p += len + 1;
	r->depth--;
	return 0;
}

int
xml_parse(const char *text, struct xel *root, char *err, size_t errlen)
{
	struct rd r = { .s = text, .p = text, .err = err, .errlen = errlen };

	memset(root, 0, sizeof *root);
	if (strncmp(r.p, "<?xml", 5) == 0) {
		const char *end = strstr(r.p, "?>");
		if (end == NULL)
			return fail(&r, "the declaration is not closed");
		r.p = end + 2;
	}
	skip_ws(&r);
	if (xml_element(&r, root) < 0)
		return -1;
	skip_ws(&r);
	if (*r.p != '\0')
		return fail(&r, "text after the root element");
	return 0;
}

const char *
xml_attr(const struct xel *e, const char *name)
{
	for (size_t i = 0; i < e->nattr; i++)
		if (strcmp(e->attr[2 * i], name) == 0)
			return e->attr[2 * i + 1];
	return NULL;
}

const struct xel *
xml_by_id(const struct xel *e, const char *id)
{
	const char *v = xml_attr(e, "id");

	if (v != NULL && strcmp(v, id) == 0)
		return e;
	for (size_t i = 0; i < e->nchild; i++) {
		const struct xel *f = xml_by_id(&e->child[i], id);
		if (f != NULL)
			return f;
	}
	return NULL;
}

int
xml_has_text(const struct xel *e, const char *needle)
{
	if (e->text != NULL && strstr(e->text, needle) != NULL)
		return 1;
	for (size_t i = 0; i < e->nchild; i++)
		if (xml_has_text(&e->child[i], needle))
			return 1;
	return 0;
}

void
xml_free(struct xel *e)
{
	for (size_t i = 0; i < e->nchild; i++)
		xml_free(&e->child[i]);
	for (size_t i = 0; i < 2 * e->nattr; i++)
		free(e->attr[i]);
	free(e->attr);
	free(e->child);
	free(e->name);
	free(e->text);
	memset(e, 0, sizeof *e);
}
